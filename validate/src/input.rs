//! What to read: files given by name, and the files found in directories.

use std::path::{Path, PathBuf};

use crate::FileError;

/// How a file's records are laid out, decided by its name (never by its content).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InputKind {
    /// One JSON document: the whole file is one record (line 1). Any name but the two
    /// below (`.json` usually).
    Document,
    /// JSON Lines: one record per line, blank lines skipped. Names ending in `.jsonl` or
    /// `.ndjson` (any case), and `-`, standard input.
    Lines,
}

impl InputKind {
    /// The kind of the file at `path`, from its name.
    ///
    /// ```
    /// use stencil_validate::InputKind;
    /// assert_eq!(InputKind::of("out/a.jsonl".as_ref()), InputKind::Lines);
    /// assert_eq!(InputKind::of("out/b.NDJSON".as_ref()), InputKind::Lines);
    /// assert_eq!(InputKind::of("out/c.json".as_ref()), InputKind::Document);
    /// assert_eq!(InputKind::of("out/d.txt".as_ref()), InputKind::Document);
    /// assert_eq!(InputKind::of("-".as_ref()), InputKind::Lines);
    /// ```
    pub fn of(path: &Path) -> InputKind {
        if is_stdin(path) {
            return InputKind::Lines;
        }
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("jsonl") || e.eq_ignore_ascii_case("ndjson") => InputKind::Lines,
            _ => InputKind::Document,
        }
    }

    /// `"json"` or `"jsonl"`, as the JSON report writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            InputKind::Document => "json",
            InputKind::Lines => "jsonl",
        }
    }
}

/// One file to check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    /// The file (`-` for standard input); for a file found in a directory, the directory
    /// path joined with the file's path inside it.
    pub path: PathBuf,
    /// How its records are laid out.
    pub kind: InputKind,
}

impl Input {
    /// The input at `path`, its kind from its name ([`InputKind::of`]).
    pub fn new(path: impl Into<PathBuf>) -> Input {
        let path = path.into();
        let kind = InputKind::of(&path);
        Input { path, kind }
    }

    /// The name reports use: the path as given, `<stdin>` for `-`.
    pub fn name(&self) -> String {
        if is_stdin(&self.path) {
            "<stdin>".to_string()
        } else {
            self.path.display().to_string()
        }
    }

    /// Whether this input is standard input (`-`).
    pub fn is_stdin(&self) -> bool {
        is_stdin(&self.path)
    }
}

fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// A path that gave no file to check: a missing path, a directory that cannot be listed or
/// holds no JSON file. Reported as an input that could not be read.
#[derive(Debug)]
pub struct InputError {
    /// The path as given.
    pub input: Input,
    /// Why it gave no file.
    pub error: FileError,
}

/// Whether a file found inside a directory is checked: `.json`, `.jsonl`, `.ndjson`.
fn is_json_name(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| ["json", "jsonl", "ndjson"].iter().any(|x| e.eq_ignore_ascii_case(x)))
}

/// The files to check for the paths given on the command line, in order: a file (or `-`)
/// stands for itself, whatever its name; a directory for the `.json`, `.jsonl` and
/// `.ndjson` files below it (any depth, any case of the extension), sorted by path.
/// Symbolic links to files are followed; links to directories are not (no cycles). A
/// path that does not exist is kept as an input, so that opening it reports the error.
///
/// ```
/// use stencil_validate::expand;
/// let dir = std::env::temp_dir().join(format!("stencil-validate-doc-{}", std::process::id()));
/// std::fs::create_dir_all(dir.join("sub"))?;
/// for f in ["b.jsonl", "a.json", "sub/c.ndjson", "notes.txt"] {
///     std::fs::write(dir.join(f), "{}\n")?;
/// }
/// let found: Vec<_> = expand(&[dir.clone()]).into_iter().map(|i| i.unwrap().path).collect();
/// assert_eq!(found, [dir.join("a.json"), dir.join("b.jsonl"), dir.join("sub/c.ndjson")]);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn expand(paths: &[PathBuf]) -> Vec<Result<Input, InputError>> {
    let mut inputs = Vec::new();
    for path in paths {
        if !is_stdin(path) && path.is_dir() {
            let mut found = Vec::new();
            let mut errors = Vec::new();
            walk(path, &mut found, &mut errors);
            found.sort();
            if found.is_empty() && errors.is_empty() {
                inputs.push(Err(InputError { input: Input::new(path.clone()), error: FileError::NoJsonFiles }));
            }
            inputs.extend(found.into_iter().map(|p| Ok(Input::new(p))));
            inputs.extend(errors.into_iter().map(|(dir, source)| {
                Err(InputError { input: Input::new(path.clone()), error: FileError::ListDir { dir, source } })
            }));
        } else {
            inputs.push(Ok(Input::new(path.clone())));
        }
    }
    inputs
}

fn walk(dir: &Path, found: &mut Vec<PathBuf>, errors: &mut Vec<(PathBuf, std::io::Error)>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => return errors.push((dir.to_path_buf(), e)),
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                errors.push((dir.to_path_buf(), e));
                continue;
            }
        };
        let path = entry.path();
        let Ok(file_type) = entry.file_type() else { continue };
        if file_type.is_dir() {
            walk(&path, found, errors);
        } else if is_json_name(&path) && (file_type.is_file() || (file_type.is_symlink() && path.is_file())) {
            found.push(path);
        }
    }
}
