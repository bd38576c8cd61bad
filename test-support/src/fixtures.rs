//! The repository's fixtures: the real vocabularies committed under `fixtures/vocab/`
//! (loaded once per process and shared), and the full models that
//! `scripts/fetch-models.sh` fetches.
//!
//! ```
//! let (vocab, tok) = stencil_test_support::fixtures::smollm2();
//! assert_eq!(vocab.len(), 49_152);
//! let ids = tok.encode(" the").unwrap();
//! assert_eq!(vocab.token_bytes(ids[0]), b" the");
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use stencil_mask::vocab::gguf::read_metadata_file;
use stencil_mask::vocab::{Tokenizer, Vocabulary};

/// SmolLM2-135M-Instruct's tokenizer metadata (49,152 tokens, GPT-2 byte-level BPE).
pub const SMOLLM2_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/vocab/smollm2-135m.tok.gguf.gz");
/// Gemma 3 270M's tokenizer metadata (262,144 tokens, SentencePiece with byte fallback).
pub const GEMMA3_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/vocab/gemma3-270m.tok.gguf.gz");

/// The full model files that `scripts/fetch-models.sh` fetches, by fixture.
pub const SMOLLM2_MODEL_FILE: &str = "smollm2-135m-instruct.q4_1.gguf";
pub const GEMMA3_MODEL_FILE: &str = "gemma-3-270m-q4_k_m.gguf";

type Pair = (Arc<Vocabulary>, Arc<Tokenizer>);

/// The repository's `fixtures/` folder.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures")
}

/// The text of `fixtures/<rel>`; panics, naming the path, when it is unreadable.
pub fn read(rel: &str) -> String {
    let path = dir().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A copy-heavy extraction of `fixtures/speculation/copy-extraction.jsonl`: a schema of
/// `fixtures/schemas/` (its file stem) and the user's message, whose answer copies facts
/// from a passage.
#[derive(Clone, Debug)]
pub struct CopyExtraction {
    pub schema: String,
    pub prompt: String,
}

/// The copy-heavy extractions, in file order; panics, naming the line, on a malformed one.
pub fn copy_extractions() -> Vec<CopyExtraction> {
    let rel = "speculation/copy-extraction.jsonl";
    read(rel)
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{rel}:{}: {e}", i + 1));
            let field =
                |k: &str| v[k].as_str().unwrap_or_else(|| panic!("{rel}:{}: no string {k:?}", i + 1)).to_string();
            CopyExtraction { schema: field("schema"), prompt: field("prompt") }
        })
        .collect()
}

/// The files of `dir` (not its subfolders) whose names end in `suffix`, sorted; panics when
/// there are none.
pub fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.to_string_lossy().ends_with(suffix))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no {suffix} files in {}", dir.display());
    v
}

/// SmolLM2-135M-Instruct's vocabulary and tokenizer. Panics if the fixture is unreadable.
pub fn smollm2() -> Pair {
    static CELL: OnceLock<Pair> = OnceLock::new();
    CELL.get_or_init(|| load(SMOLLM2_PATH)).clone()
}

/// Gemma 3 270M's vocabulary and tokenizer. Panics if the fixture is unreadable.
pub fn gemma3() -> Pair {
    static CELL: OnceLock<Pair> = OnceLock::new();
    CELL.get_or_init(|| load(GEMMA3_PATH)).clone()
}

fn load(path: &str) -> Pair {
    let meta = read_metadata_file(path).unwrap_or_else(|e| panic!("fixture {path}: {e}"));
    let vocab = Vocabulary::from_gguf_metadata(&meta).unwrap_or_else(|e| panic!("{path}: {e}"));
    let tok = Tokenizer::from_gguf_metadata(&meta).unwrap_or_else(|e| panic!("{path}: {e}"));
    (Arc::new(vocab), Arc::new(tok))
}

/// Where `scripts/fetch-models.sh` puts the full models:
/// `$STENCIL_MODELS_DIR`, else `$HOME/.cache/stencil/models` (the CLI's model cache,
/// `cli/src/models.rs`, is the same folder).
pub fn models_dir() -> PathBuf {
    match std::env::var_os("STENCIL_MODELS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME").unwrap_or_default();
            PathBuf::from(home).join(".cache/stencil/models")
        }
    }
}

/// The path of a fetched full model (e.g. [`GEMMA3_MODEL_FILE`]); panics, saying to run
/// `scripts/fetch-models.sh`, when it is missing.
pub fn model_path(file: &str) -> PathBuf {
    let path = models_dir().join(file);
    if !path.is_file() {
        panic!(
            "model {} is missing: run scripts/fetch-models.sh (it fetches the models with pip \
             into $STENCIL_MODELS_DIR or ~/.cache/stencil/models)",
            path.display()
        );
    }
    path
}
