//! The GBNF parser on arbitrary bytes, then the printer round trip and the engine.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    stencil_fuzz::checks::check_gbnf(data);
});
