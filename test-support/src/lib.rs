//! What Stencil's tests share, in one place instead of a copy per test binary
//! (`publish = false`: nothing here is part of any crate's API).
//!
//! - [`fixtures`]: the real vocabularies committed under `fixtures/vocab/`, loaded once per
//!   process; the repository's `fixtures/` folder; where `scripts/fetch-models.sh` puts the
//!   full models.
//! - [`toy`]: the small hand-made vocabularies of the engine and schema suites, by name.
//! - [`rng`]: the seeded generators the tests draw from.
//! - [`hostile`]: generators of hostile schemas and grammars at any size (deep `$ref`
//!   chains, cycles, huge enums, rule chains), shared by the tests and the fuzz targets.
//! - [`snapshot`]: the runner of the `fixtures/bad/` catalogues (an input, its `.expected`
//!   file), and the one variable that rewrites expected files, `STENCIL_UPDATE=1`.
//! - [`corpus`]: the JSON-Schema-Test-Suite and JSONSchemaBench folders, and "does the mask
//!   accept this text".
//! - [`checks`]: the properties the fuzz targets check, which the regression replay test runs
//!   too (`fuzz/` re-exports this module).
//! - [`process`]: reading a finished command's status and output.
//! - [`stats`]: the chi-square goodness-of-fit of the statistical tests.
//! - `table` (feature `models`): a table-driven model behind the runtime's `Forward`, for
//!   tests of the decode loop that need exact distributions.
//! - `models` (feature `models`, it links llama.cpp): the real models, loaded once per test
//!   binary.
//!
//! Everything here panics on a missing or unreadable fixture, saying what to run: the suites
//! fail, never skip.

pub mod checks;
pub mod corpus;
pub mod fixtures;
pub mod hostile;
#[cfg(feature = "models")]
pub mod models;
pub mod process;
pub mod rng;
pub mod snapshot;
pub mod stats;
#[cfg(feature = "models")]
pub mod table;
pub mod toy;
