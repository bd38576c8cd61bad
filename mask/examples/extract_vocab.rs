//! Writes the tokenizer part of a GGUF model as a small gzip-compressed GGUF: the
//! `general.*` and `tokenizer.*` metadata, no tensors. Used by
//! `scripts/extract-vocab-fixtures.sh` to make `fixtures/vocab/`.
//!
//! ```text
//! cargo run -p stencil-mask --example extract_vocab -- MODEL.gguf OUT.tok.gguf.gz
//! ```

use std::fs::File;
use std::io::{BufWriter, Write};

use flate2::write::GzEncoder;
use flate2::Compression;
use stencil_mask::vocab::gguf::{read_metadata_file, write_metadata};
use stencil_mask::vocab::Tokenizer;
use stencil_mask::Vocabulary;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output] = args.as_slice() else {
        return Err("usage: extract_vocab MODEL.gguf OUT.tok.gguf.gz".into());
    };
    let meta = read_metadata_file(input)?;
    let kvs: Vec<_> =
        meta.kvs.iter().filter(|(k, _)| k.starts_with("general.") || k.starts_with("tokenizer.")).cloned().collect();
    // Deterministic output: flate2's gzip header has no name and mtime 0.
    let mut gz = GzEncoder::new(BufWriter::new(File::create(output)?), Compression::best());
    write_metadata(&mut gz, &kvs)?;
    gz.finish()?.flush()?;

    // The fixture must give the same vocabulary and tokenizer as the model.
    let (full, small) = (Vocabulary::from_gguf(input)?, Vocabulary::from_gguf(output)?);
    if full != small {
        return Err(format!("{output}: vocabulary differs from {input}'s").into());
    }
    let (full, small) = (Tokenizer::from_gguf(input)?, Tokenizer::from_gguf(output)?);
    let probe = "Hello world! {\"key\": [1, 2.5e-3]}\n\t  ünïcödé 😀";
    if full.encode(probe)? != small.encode(probe)? {
        return Err(format!("{output}: tokenizer differs from {input}'s").into());
    }
    eprintln!("{output}: {} keys, {} bytes", kvs.len(), std::fs::metadata(output)?.len());
    Ok(())
}
