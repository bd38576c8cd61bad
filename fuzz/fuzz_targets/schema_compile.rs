//! The JSON Schema compiler on generated schemas (structure-aware, through `arbitrary`).
#![no_main]

use stencil_fuzz::gen::SchemaInput;

libfuzzer_sys::fuzz_target!(|input: SchemaInput| {
    let case = input.case();
    stencil_fuzz::print_case(&case.to_json());
    stencil_fuzz::checks::check_schema(&case);
});
