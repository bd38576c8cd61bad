//! Stencil's fuzz targets: the checks ([`checks`], which live in `stencil-test-support` and
//! are shared with the regression replay test) and the structure-aware input types
//! ([`gen`]). See `FUZZING.md` at the repository root.

pub use stencil_test_support::checks;
pub mod gen;

/// Prints a decoded structured input as JSON when `STENCIL_FUZZ_PRINT` is set: the form
/// committed under `fixtures/fuzz-regressions/<target>/`.
pub fn print_case(case: &serde_json::Value) {
    if std::env::var_os("STENCIL_FUZZ_PRINT").is_some() {
        eprintln!("{}", serde_json::to_string_pretty(case).expect("JSON prints"));
    }
}
