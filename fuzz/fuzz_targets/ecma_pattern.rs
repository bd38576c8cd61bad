//! ECMA-262 → regex translation on arbitrary text, then the pattern as a schema.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(pattern) = std::str::from_utf8(data) {
        stencil_fuzz::checks::check_pattern(pattern);
    }
});
