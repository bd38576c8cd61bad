//! `stencil watermark detect` (the z-test of `stencil_sampling::watermark` over texts,
//! tokenized by the model's tokenizer) and the `--watermark-*` flags of `stencil generate`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::{json, Value};
use stencil_mask::{CompiledGrammar, Matcher, Vocabulary};
use stencil_runtime::sampling::watermark::{DEFAULT_CONTEXT_WIDTH, DEFAULT_GAMMA, DEFAULT_THRESHOLD};
use stencil_runtime::sampling::{Detection, Greenlist, SamplingParams, Seeding, WatermarkKey, WatermarkParams};

use crate::error::CliError;
use crate::print_line;
use crate::source::{GrammarSource, SchemaFile};
use crate::vocab::LoadedVocab;

/// `stencil watermark`.
#[derive(Args, Debug)]
pub struct WatermarkArgs {
    #[command(subcommand)]
    command: WatermarkCommand,
}

#[derive(Subcommand, Debug)]
enum WatermarkCommand {
    /// Test texts for the greenlist watermark of `generate --watermark-key`: tokenize each
    /// text with the model's tokenizer, count the tokens green under the key, and report the
    /// z-score and one-sided p-value.
    ///
    /// Each FILE is one text (one final newline dropped: `generate` prints one), or with
    /// --jsonl one text per non-blank line: a JSON object's "text" string, a JSON string's
    /// value, or else the line as it is. `-` is standard input. Every token after the first
    /// --context-width tokens is scored once per distinct (context, token) pair (repeated
    /// n-grams count once); z = (green - gamma T) / sqrt(T gamma (1 - gamma)) over the T
    /// scored tokens, and the verdict is "watermarked" when z >= --threshold.
    ///
    /// Tokens a grammar forced were not sampled, so they carry no signal and dilute z; from
    /// the text alone they cannot be told apart. With --schema or --grammar (the one the text
    /// was generated under, with the same shape flags) the tokens that lie within the bytes
    /// the grammar forces at their place are left out.
    ///
    /// Prints one line per text (with --format json, one JSON object per line) and a summary
    /// on stderr. Exits 0 when every text is watermarked, 1 when some text is not, 2 for bad
    /// input (a text that cannot be read or tokenized, bad arguments).
    #[command(after_help = "Example:\n  \
        stencil generate --temperature 1 --watermark-key K -p 'Tell me a story' > story.txt\n  \
        stencil watermark detect --key K story.txt")]
    Detect(DetectArgs),
}

/// `stencil watermark detect`.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("key_source").required(true).args(["key", "key_file"])))]
struct DetectArgs {
    /// The watermark's secret key.
    #[arg(long, value_name = "KEY")]
    key: Option<String>,
    /// Read the key from a file (its content, without a final newline): keeps it out of
    /// the shell history and the process list.
    #[arg(long, value_name = "FILE")]
    key_file: Option<PathBuf>,
    /// The green fraction the text was generated with.
    #[arg(long, value_name = "G", default_value_t = DEFAULT_GAMMA)]
    gamma: f64,
    /// The context width the text was generated with (previous tokens that seed the
    /// greenlist).
    #[arg(long, value_name = "H", default_value_t = DEFAULT_CONTEXT_WIDTH)]
    context_width: u32,
    /// The seeding scheme the text was generated with.
    #[arg(long, value_enum, value_name = "SCHEME", default_value = "left-hash")]
    seeding: SeedingArg,
    /// The vocabulary whose tokenizer splits the texts: a GGUF file (.gguf or .gguf.gz) or
    /// a Hugging Face tokenizer.json.
    #[arg(long, short = 'v', value_name = "FILE", conflicts_with = "model")]
    vocab: Option<PathBuf>,
    /// The GGUF model the texts were generated with (its tokenizer is used; default:
    /// $STENCIL_MODEL, else SmolLM2-135M-Instruct from the cache, as for `generate`).
    #[arg(long, short = 'm', value_name = "FILE")]
    model: Option<PathBuf>,
    /// The z-score from which a text is called watermarked (4: a one-sided p-value of
    /// about 3e-5 per text without the watermark).
    #[arg(long, value_name = "Z", default_value_t = DEFAULT_THRESHOLD, allow_negative_numbers = true)]
    threshold: f64,
    /// Each line of each file is one text (JSONL).
    #[arg(long)]
    jsonl: bool,
    /// text: one line per text; json: one JSON object per text.
    #[arg(long, value_enum, value_name = "FORMAT", default_value = "text")]
    format: DetectFormat,
    /// Leave out the tokens this GBNF grammar forces.
    #[arg(long, short = 'g', value_name = "FILE", conflicts_with = "schema")]
    grammar: Option<PathBuf>,
    /// Leave out the tokens the grammar of this JSON Schema forces.
    #[arg(long, value_name = "FILE")]
    schema: Option<PathBuf>,
    #[command(flatten)]
    shape: crate::SchemaShapeArgs,
    /// The texts (`-`: standard input).
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum SeedingArg {
    LeftHash,
    MinHash,
}

impl From<SeedingArg> for Seeding {
    fn from(s: SeedingArg) -> Seeding {
        match s {
            SeedingArg::LeftHash => Seeding::LeftHash,
            SeedingArg::MinHash => Seeding::MinHash,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum DetectFormat {
    Text,
    Json,
}

/// The watermark flags of `stencil generate`, applied over the preset's watermark.
#[derive(Args, Clone, Debug, Default)]
#[group(skip)]
pub struct GenerateFlags {
    /// Watermark the output with this secret key (a greenlist watermark: `stencil
    /// watermark detect --key KEY` finds it). The key is never printed nor logged.
    #[arg(long, value_name = "KEY", conflicts_with = "watermark_key_file")]
    watermark_key: Option<String>,
    /// Read the watermark key from a file (its content, without a final newline).
    #[arg(long, value_name = "FILE")]
    watermark_key_file: Option<PathBuf>,
    /// The watermark's green fraction (default 0.25).
    #[arg(long, value_name = "G")]
    watermark_gamma: Option<f64>,
    /// The watermark's bias on green tokens' logits (default 2).
    #[arg(long, value_name = "D")]
    watermark_delta: Option<f32>,
    /// How many previous tokens seed the greenlist (default 1).
    #[arg(long, value_name = "H")]
    watermark_context_width: Option<u32>,
    /// How the previous tokens seed the greenlist (default left-hash).
    #[arg(long, value_enum, value_name = "SCHEME")]
    watermark_seeding: Option<SeedingArg>,
}

impl GenerateFlags {
    /// Sets `params.watermark` from the flags: a key turns it on (keeping the preset's other
    /// settings), the other flags change an existing one.
    ///
    /// # Errors
    ///
    /// [`CliError::Usage`] for a setting without a key (from the flags or the preset), and
    /// [`CliError::Read`] for an unreadable key file.
    pub fn apply(&self, params: &mut SamplingParams) -> Result<(), CliError> {
        let key = read_key(self.watermark_key.as_deref(), self.watermark_key_file.as_deref())?;
        if let Some(key) = key {
            let w = params.watermark.get_or_insert_with(|| WatermarkParams::new(key.clone()));
            w.key = key;
        }
        let settings = self.watermark_gamma.is_some()
            || self.watermark_delta.is_some()
            || self.watermark_context_width.is_some()
            || self.watermark_seeding.is_some();
        let Some(w) = params.watermark.as_mut() else {
            if settings {
                return Err(CliError::Usage(
                    "--watermark-gamma, --watermark-delta, --watermark-context-width and --watermark-seeding need \
                     --watermark-key (or a preset with a watermark)"
                        .into(),
                ));
            }
            return Ok(());
        };
        if let Some(g) = self.watermark_gamma {
            w.gamma = g;
        }
        if let Some(d) = self.watermark_delta {
            w.delta = d;
        }
        if let Some(h) = self.watermark_context_width {
            w.context_width = h;
        }
        if let Some(s) = self.watermark_seeding {
            w.seeding = s.into();
        }
        Ok(())
    }
}

/// The key from `--key` or the content of `--key-file` (one final newline dropped).
fn read_key(key: Option<&str>, file: Option<&Path>) -> Result<Option<WatermarkKey>, CliError> {
    if let Some(key) = key {
        return Ok(Some(WatermarkKey::new(key)));
    }
    let Some(path) = file else { return Ok(None) };
    let text = read_text(path, "key file")?;
    let text = text.strip_suffix('\n').map(|t| t.strip_suffix('\r').unwrap_or(t)).unwrap_or(&text);
    Ok(Some(WatermarkKey::new(text)))
}

/// Runs `stencil watermark ...`.
pub fn run(args: &WatermarkArgs) -> Result<ExitCode, CliError> {
    match &args.command {
        WatermarkCommand::Detect(a) => detect(a),
    }
}

/// One text to test, and where it comes from.
struct Text {
    file: PathBuf,
    /// The line, for JSONL input.
    line: Option<usize>,
    text: String,
}

fn detect(args: &DetectArgs) -> Result<ExitCode, CliError> {
    let key = read_key(args.key.as_deref(), args.key_file.as_deref())?.expect("clap requires a key");
    let greenlist = Greenlist::new(&key, args.gamma, args.context_width, args.seeding.into())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    if !args.threshold.is_finite() {
        return Err(CliError::Usage(format!("--threshold {}: expected a finite z-score", args.threshold)));
    }
    let vocab_path = match (&args.vocab, &args.model) {
        (Some(v), _) => v.clone(),
        (None, model) => crate::models::resolve(model.as_ref())?,
    };
    let vocab = LoadedVocab::load(&vocab_path)?;
    let tokenizer = vocab.tokenizer()?;
    let grammar = forcing_grammar(args, &vocab)?;

    let (mut texts, mut watermarked, mut bad) = (0usize, 0usize, 0usize);
    for file in &args.files {
        for text in read_texts(file, args.jsonl)? {
            let place = match text.line {
                Some(line) => format!("{}:{line}", text.file.display()),
                None => text.file.display().to_string(),
            };
            let tokens = match tokenizer.encode(&text.text) {
                Ok(tokens) => tokens,
                Err(e) => {
                    eprintln!("{place}: cannot tokenize the text: {e}");
                    bad += 1;
                    continue;
                }
            };
            let (detection, left_grammar) = match &grammar {
                Some(g) => detect_unforced(&greenlist, g, &vocab.vocab, &tokens),
                None => (greenlist.detect(&tokens), None),
            };
            let verdict = detection.is_watermarked(args.threshold);
            texts += 1;
            watermarked += usize::from(verdict);
            print_line(&report(args.format, &place, &text, &detection, verdict, left_grammar))?;
        }
    }
    eprintln!(
        "{watermarked} of {texts} text{} watermarked (z >= {}){}",
        if texts == 1 { "" } else { "s" },
        args.threshold,
        if bad > 0 { format!("; {bad} could not be tokenized") } else { String::new() }
    );
    Ok(ExitCode::from(if bad > 0 {
        2
    } else if watermarked == texts {
        0
    } else {
        1
    }))
}

/// The report line of one text.
fn report(
    format: DetectFormat,
    place: &str,
    text: &Text,
    d: &Detection,
    verdict: bool,
    left_grammar: Option<usize>,
) -> String {
    match format {
        DetectFormat::Json => json!({
            "file": text.file.display().to_string(),
            "line": text.line,
            "tokens": d.tokens,
            "scored": d.scored,
            "repeated": d.repeated,
            "forced": d.skipped,
            "green": d.green,
            "green_fraction": d.green_fraction,
            "z": d.z,
            "p_value": d.p_value,
            "watermarked": verdict,
            "leaves_grammar_at_token": left_grammar,
        })
        .to_string(),
        DetectFormat::Text => {
            let forced = if d.skipped > 0 { format!(", {} forced left out", d.skipped) } else { String::new() };
            let left = left_grammar.map(|i| format!(" (leaves the grammar at token {i})")).unwrap_or_default();
            format!(
                "{place}: {} tokens, {} scored{forced}, green {:.3}, z {:.2}, p {:.3e}: {}{left}",
                d.tokens,
                d.scored,
                d.green_fraction,
                d.z,
                d.p_value,
                if verdict { "watermarked" } else { "not detected" }
            )
        }
    }
}

/// The grammar of --schema or --grammar, compiled against the vocabulary.
fn forcing_grammar(args: &DetectArgs, vocab: &LoadedVocab) -> Result<Option<Arc<CompiledGrammar>>, CliError> {
    let source = match (&args.grammar, &args.schema) {
        (Some(_), _) if args.shape.any_given() => {
            return Err(CliError::Usage(
                "--lenient, --whitespace, --max-whitespace, --indent and --any-order apply to --schema only".into(),
            ))
        }
        (Some(path), _) => GrammarSource::Gbnf(path.clone()),
        (None, Some(path)) => GrammarSource::Schema(SchemaFile { path: path.clone(), options: args.shape.options()? }),
        (None, None) => return Ok(None),
    };
    let loaded = source.load()?;
    let (compiled, _) = source.compile(&loaded.grammar, vocab.vocab.clone(), Some(&vocab.path))?;
    Ok(Some(compiled))
}

/// The z-test over the tokens the grammar does not force: token `i` is left out when its
/// bytes lie within the bytes the grammar forces after tokens `..i` (what fast-forward
/// appends without sampling). Also the token at which the text leaves the grammar, if it
/// does (from there on every token is scored).
fn detect_unforced(
    greenlist: &Greenlist,
    grammar: &Arc<CompiledGrammar>,
    vocab: &Vocabulary,
    tokens: &[u32],
) -> (Detection, Option<usize>) {
    let mut matcher = Some(Matcher::new(grammar.clone()));
    let mut left = None;
    let mut forced = vec![false; tokens.len()];
    for (i, &token) in tokens.iter().enumerate() {
        let Some(m) = matcher.as_mut() else { break };
        let bytes = vocab.token_bytes(token);
        forced[i] = vocab.is_text(token) && !bytes.is_empty() && m.forced_bytes(bytes.len()) == bytes;
        if m.accept_token(token).is_err() {
            forced[i] = false;
            left = Some(i);
            matcher = None;
        }
    }
    (greenlist.detect_where(tokens, |i| !forced[i]), left)
}

/// The texts of one input: the whole file, or with `jsonl` one per non-blank line.
fn read_texts(file: &Path, jsonl: bool) -> Result<Vec<Text>, CliError> {
    let content = read_text(file, "text file")?;
    if !jsonl {
        let text = content.strip_suffix('\n').unwrap_or(&content).to_string();
        return Ok(vec![Text { file: file.to_path_buf(), line: None, text }]);
    }
    Ok(content
        .lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(i, line)| Text { file: file.to_path_buf(), line: Some(i + 1), text: record_text(line) })
        .collect())
}

/// A JSONL record's text: an object's "text" string, a JSON string's value, or the line.
fn record_text(line: &str) -> String {
    match serde_json::from_str::<Value>(line) {
        Ok(Value::String(s)) => s,
        Ok(Value::Object(o)) => match o.get("text") {
            Some(Value::String(s)) => s.clone(),
            _ => line.to_string(),
        },
        _ => line.to_string(),
    }
}

/// A file's content as UTF-8 (`-`: standard input).
fn read_text(path: &Path, what: &'static str) -> Result<String, CliError> {
    let mut bytes = Vec::new();
    let read = if path == Path::new("-") {
        std::io::stdin().lock().read_to_end(&mut bytes).map(|_| ())
    } else {
        std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut bytes)).map(|_| ())
    };
    read.map_err(|source| CliError::Read { what, path: path.to_path_buf(), source })?;
    String::from_utf8(bytes)
        .map_err(|e| CliError::TextNotUtf8 { path: path.to_path_buf(), offset: e.utf8_error().valid_up_to() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_texts() {
        assert_eq!(record_text(r#"{"text": "a b", "id": 1}"#), "a b");
        assert_eq!(record_text(r#""quoted""#), "quoted");
        assert_eq!(record_text(r#"{"name": "x"}"#), r#"{"name": "x"}"#);
        assert_eq!(record_text("plain words"), "plain words");
    }

    #[test]
    fn flags_apply_over_the_preset() {
        let flags = |key: Option<&str>, gamma: Option<f64>| GenerateFlags {
            watermark_key: key.map(String::from),
            watermark_gamma: gamma,
            ..GenerateFlags::default()
        };
        let mut p = SamplingParams::default();
        flags(None, None).apply(&mut p).unwrap();
        assert_eq!(p.watermark, None);
        assert!(matches!(flags(None, Some(0.5)).apply(&mut p), Err(CliError::Usage(_))));
        flags(Some("k"), Some(0.5)).apply(&mut p).unwrap();
        let w = p.watermark.clone().unwrap();
        assert_eq!((w.key, w.gamma, w.delta), (WatermarkKey::new("k"), 0.5, 2.0));
        // A preset's watermark keeps its settings under a new key; a setting alone changes it.
        flags(Some("other"), None).apply(&mut p).unwrap();
        assert_eq!(p.watermark.as_ref().map(|w| (&w.key, w.gamma)), Some((&WatermarkKey::new("other"), 0.5)));
        flags(None, Some(0.1)).apply(&mut p).unwrap();
        assert_eq!(p.watermark.as_ref().map(|w| w.gamma), Some(0.1));
    }
}
