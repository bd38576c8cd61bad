//! A small, safe reader (and writer) for the metadata of GGUF files, and the vocabulary
//! they describe.
//!
//! Only the header and the metadata key/values are read, never the tensor infos or data.
//! Versions 2 and 3 are supported, little-endian only. Every length is checked against
//! the bytes that can still follow, and containers grow only as their bytes actually
//! arrive, so a truncated or hostile file gives a [`GgufError`], never a panic or a
//! huge allocation. Gzip-compressed files (as in `fixtures/vocab/`) are detected by their
//! magic and decompressed on the fly.
//!
//! ```
//! use stencil_mask::vocab::gguf::{self, GgufValue};
//! let kvs = vec![("general.name".to_string(), GgufValue::String(b"tiny".to_vec()))];
//! let mut file = Vec::new();
//! gguf::write_metadata(&mut file, &kvs).unwrap();
//! let meta = gguf::read_metadata(&file[..]).unwrap();
//! assert_eq!(meta.get_str("general.name"), Some("tiny"));
//! ```

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Read, Write};
use std::path::Path;

use thiserror::Error;

use super::{TokenKind, VocabError, Vocabulary};

/// `GGUF` as a little-endian u32.
const MAGIC: [u8; 4] = *b"GGUF";
/// The largest gzip-decompressed input read; also bounds lengths inside it.
const MAX_DECOMPRESSED: u64 = 256 << 20;
/// The deepest nesting of arrays accepted.
const MAX_DEPTH: u32 = 4;
/// Containers never reserve more than this many elements ahead of their bytes.
const RESERVE_CAP: usize = 1 << 16;

/// Errors reading GGUF metadata or building a vocabulary from it.
#[derive(Debug, Error)]
pub enum GgufError {
    /// The file could not be read.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
    /// The first four bytes are not `GGUF`.
    #[error("not a GGUF file (magic {0:02x?})")]
    BadMagic([u8; 4]),
    /// A format version other than 2 and 3.
    #[error("unsupported GGUF version {0} (2 and 3 are)")]
    UnsupportedVersion(u32),
    /// The file ends inside its metadata.
    #[error("the file ends inside its metadata")]
    Truncated,
    /// A length field larger than what is left of the file.
    #[error("a length of {len} at offset {offset} exceeds the {left} bytes that follow")]
    LengthTooLarge {
        /// The length read.
        len: u64,
        /// Where it was read.
        offset: u64,
        /// The bytes left after it.
        left: u64,
    },
    /// A value type tag GGUF does not define.
    #[error("unknown value type {0}")]
    BadType(u32),
    /// Arrays nested too deeply.
    #[error("arrays nested deeper than {MAX_DEPTH}")]
    TooDeep,
    /// A metadata key that is not UTF-8.
    #[error("metadata key is not UTF-8")]
    KeyNotUtf8,
    /// A metadata key given twice.
    #[error("duplicate metadata key {0:?}")]
    DuplicateKey(String),
    /// A metadata key the vocabulary needs is absent.
    #[error("missing metadata key {0:?}")]
    MissingKey(&'static str),
    /// A metadata value of another type than the key's.
    #[error("metadata key {key:?} has the wrong type")]
    WrongType {
        /// The key.
        key: &'static str,
    },
    /// An array of another length than the vocabulary's.
    #[error("{key:?} has {len} entries, expected {expected}")]
    WrongLength {
        /// The key.
        key: &'static str,
        /// Its entries.
        len: usize,
        /// The entries expected.
        expected: usize,
    },
    /// A `tokenizer.ggml.model` this crate does not know.
    #[error("unsupported tokenizer model {0:?}")]
    UnsupportedModel(String),
    /// A byte token whose text is not `<0xHH>`.
    #[error("byte token {id} has malformed text {text:?}")]
    BadByteToken {
        /// The token's id.
        id: u32,
        /// Its text.
        text: String,
    },
    /// The tokens make no valid vocabulary.
    #[error(transparent)]
    Vocab(#[from] VocabError),
}

/// The type tag of a GGUF value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
#[allow(missing_docs)] // The tags are their names.
pub enum GgufType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl GgufType {
    fn from_u32(t: u32) -> Result<Self, GgufError> {
        use GgufType::*;
        Ok(match t {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return Err(GgufError::BadType(t)),
        })
    }

    /// The fewest bytes one value of this type takes in a file.
    fn min_size(self) -> u64 {
        use GgufType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 | String => 8,
            Array => 12,
        }
    }
}

/// A metadata value. Strings are kept as raw bytes: GGUF says UTF-8, but token texts of
/// real models are not always valid.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs)] // One variant per [`GgufType`], of that type.
pub enum GgufValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(Vec<u8>),
    /// The element type, and the elements (all of that type).
    Array(GgufType, Vec<GgufValue>),
    U64(u64),
    I64(i64),
    F64(f64),
}

impl GgufValue {
    /// The type tag of this value.
    pub fn ty(&self) -> GgufType {
        match self {
            GgufValue::U8(_) => GgufType::U8,
            GgufValue::I8(_) => GgufType::I8,
            GgufValue::U16(_) => GgufType::U16,
            GgufValue::I16(_) => GgufType::I16,
            GgufValue::U32(_) => GgufType::U32,
            GgufValue::I32(_) => GgufType::I32,
            GgufValue::F32(_) => GgufType::F32,
            GgufValue::Bool(_) => GgufType::Bool,
            GgufValue::String(_) => GgufType::String,
            GgufValue::Array(..) => GgufType::Array,
            GgufValue::U64(_) => GgufType::U64,
            GgufValue::I64(_) => GgufType::I64,
            GgufValue::F64(_) => GgufType::F64,
        }
    }

    /// Any integer value that fits in `u64` (negative ones do not).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            GgufValue::U8(v) => Some(v.into()),
            GgufValue::U16(v) => Some(v.into()),
            GgufValue::U32(v) => Some(v.into()),
            GgufValue::U64(v) => Some(v),
            GgufValue::I8(v) => u64::try_from(v).ok(),
            GgufValue::I16(v) => u64::try_from(v).ok(),
            GgufValue::I32(v) => u64::try_from(v).ok(),
            GgufValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any integer value that fits in `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            GgufValue::I8(v) => Some(v.into()),
            GgufValue::I16(v) => Some(v.into()),
            GgufValue::I32(v) => Some(v.into()),
            GgufValue::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    /// A float value (f32 or f64).
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            GgufValue::F32(v) => Some(v),
            GgufValue::F64(v) => Some(v as f32),
            _ => None,
        }
    }

    /// A boolean value.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            GgufValue::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// The raw bytes of a string value.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            GgufValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// A string value that is valid UTF-8.
    pub fn as_str(&self) -> Option<&str> {
        self.as_bytes().and_then(|b| std::str::from_utf8(b).ok())
    }

    /// The elements of an array value.
    pub fn as_array(&self) -> Option<&[GgufValue]> {
        match self {
            GgufValue::Array(_, v) => Some(v),
            _ => None,
        }
    }
}

/// The header and metadata of a GGUF file, key/values in file order.
#[derive(Clone, Debug, PartialEq)]
pub struct GgufMetadata {
    /// The format version (2 or 3).
    pub version: u32,
    /// Tensors the file declares (their infos are not read).
    pub tensor_count: u64,
    /// The key/value pairs, in file order.
    pub kvs: Vec<(String, GgufValue)>,
}

impl GgufMetadata {
    /// The value of a key.
    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        self.kvs.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The value of a string key, if it is valid UTF-8.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(GgufValue::as_str)
    }

    /// The value of an integer key.
    pub fn get_u64(&self, key: &str) -> Option<u64> {
        self.get(key).and_then(GgufValue::as_u64)
    }

    /// The value of an array key; `MissingKey`/`WrongType` otherwise.
    pub(crate) fn array(&self, key: &'static str) -> Result<&[GgufValue], GgufError> {
        self.get(key).ok_or(GgufError::MissingKey(key))?.as_array().ok_or(GgufError::WrongType { key })
    }

    /// The value of an optional array key that must have `len` elements when present.
    pub(crate) fn array_of_len(&self, key: &'static str, len: usize) -> Result<Option<&[GgufValue]>, GgufError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => {
                let a = v.as_array().ok_or(GgufError::WrongType { key })?;
                if a.len() != len {
                    return Err(GgufError::WrongLength { key, len: a.len(), expected: len });
                }
                Ok(Some(a))
            }
        }
    }
}

/// Reads the metadata of a GGUF file (plain or gzip-compressed), without its tensors.
pub fn read_metadata_file(path: impl AsRef<Path>) -> Result<GgufMetadata, GgufError> {
    let file = File::open(path)?;
    let len = file.metadata()?.len();
    read_with_limit(BufReader::new(file), len)
}

/// Reads the metadata of GGUF bytes (plain or gzip-compressed).
pub fn read_metadata(bytes: &[u8]) -> Result<GgufMetadata, GgufError> {
    read_with_limit(bytes, bytes.len() as u64)
}

/// Reads from `input`, of which at most `len` bytes exist.
fn read_with_limit(mut input: impl Read, len: u64) -> Result<GgufMetadata, GgufError> {
    let mut head = [0u8; 2];
    let n = read_fully(&mut input, &mut head)?;
    let head = &head[..n];
    let chained = head.chain(input);
    if head == [0x1f, 0x8b] {
        let gz = flate2::read::GzDecoder::new(chained).take(MAX_DECOMPRESSED);
        Parser { input: gz, pos: 0, left: MAX_DECOMPRESSED }.metadata()
    } else {
        Parser { input: chained, pos: 0, left: len }.metadata()
    }
}

/// Like `read_exact`, but returns how many bytes it read before the end.
fn read_fully(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

struct Parser<R> {
    input: R,
    /// Bytes consumed so far.
    pos: u64,
    /// Bytes that may still follow.
    left: u64,
}

impl<R: Read> Parser<R> {
    fn metadata(mut self) -> Result<GgufMetadata, GgufError> {
        let magic: [u8; 4] = self.array()?;
        if magic != MAGIC {
            return Err(GgufError::BadMagic(magic));
        }
        let version = self.u32()?;
        if version != 2 && version != 3 {
            return Err(GgufError::UnsupportedVersion(version));
        }
        let tensor_count = self.u64()?;
        let kv_count = self.u64()?;
        // A key/value takes at least 8 (key length) + 4 (type) + 1 bytes.
        self.check_len(kv_count, 13)?;
        let mut kvs = Vec::with_capacity((kv_count as usize).min(RESERVE_CAP));
        let mut seen = HashMap::new();
        for _ in 0..kv_count {
            let key = String::from_utf8(self.string()?).map_err(|_| GgufError::KeyNotUtf8)?;
            if seen.insert(key.clone(), ()).is_some() {
                return Err(GgufError::DuplicateKey(key));
            }
            let ty = GgufType::from_u32(self.u32()?)?;
            let value = self.value(ty, 0)?;
            kvs.push((key, value));
        }
        Ok(GgufMetadata { version, tensor_count, kvs })
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], GgufError> {
        let mut buf = [0u8; N];
        let n = read_fully(&mut self.input, &mut buf)?;
        self.pos += n as u64;
        self.left = self.left.saturating_sub(n as u64);
        if n < N {
            return Err(GgufError::Truncated);
        }
        Ok(buf)
    }

    fn u32(&mut self) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// Fails unless `count` items of at least `size` bytes each can still follow.
    fn check_len(&self, count: u64, size: u64) -> Result<(), GgufError> {
        match count.checked_mul(size) {
            Some(n) if n <= self.left => Ok(()),
            _ => Err(GgufError::LengthTooLarge { len: count, offset: self.pos, left: self.left }),
        }
    }

    fn string(&mut self) -> Result<Vec<u8>, GgufError> {
        let len = self.u64()?;
        self.check_len(len, 1)?;
        let mut buf = Vec::with_capacity((len as usize).min(RESERVE_CAP));
        let n = (&mut self.input).take(len).read_to_end(&mut buf)? as u64;
        self.pos += n;
        self.left = self.left.saturating_sub(n);
        if n < len {
            return Err(GgufError::Truncated);
        }
        Ok(buf)
    }

    fn value(&mut self, ty: GgufType, depth: u32) -> Result<GgufValue, GgufError> {
        Ok(match ty {
            GgufType::U8 => GgufValue::U8(self.array::<1>()?[0]),
            GgufType::I8 => GgufValue::I8(self.array::<1>()?[0] as i8),
            GgufType::U16 => GgufValue::U16(u16::from_le_bytes(self.array()?)),
            GgufType::I16 => GgufValue::I16(i16::from_le_bytes(self.array()?)),
            GgufType::U32 => GgufValue::U32(self.u32()?),
            GgufType::I32 => GgufValue::I32(i32::from_le_bytes(self.array()?)),
            GgufType::F32 => GgufValue::F32(f32::from_le_bytes(self.array()?)),
            GgufType::Bool => GgufValue::Bool(self.array::<1>()?[0] != 0),
            GgufType::String => GgufValue::String(self.string()?),
            GgufType::U64 => GgufValue::U64(self.u64()?),
            GgufType::I64 => GgufValue::I64(i64::from_le_bytes(self.array()?)),
            GgufType::F64 => GgufValue::F64(f64::from_le_bytes(self.array()?)),
            GgufType::Array => {
                if depth >= MAX_DEPTH {
                    return Err(GgufError::TooDeep);
                }
                let elem = GgufType::from_u32(self.u32()?)?;
                let count = self.u64()?;
                self.check_len(count, elem.min_size())?;
                let mut values = Vec::with_capacity((count as usize).min(RESERVE_CAP));
                for _ in 0..count {
                    values.push(self.value(elem, depth + 1)?);
                }
                GgufValue::Array(elem, values)
            }
        })
    }
}

/// Writes a GGUF v3 file with these metadata key/values and no tensors.
///
/// Arrays must hold values of their element type (`InvalidInput` otherwise).
pub fn write_metadata(out: &mut impl Write, kvs: &[(String, GgufValue)]) -> io::Result<()> {
    out.write_all(&MAGIC)?;
    out.write_all(&3u32.to_le_bytes())?;
    out.write_all(&0u64.to_le_bytes())?;
    out.write_all(&(kvs.len() as u64).to_le_bytes())?;
    for (key, value) in kvs {
        write_string(out, key.as_bytes())?;
        out.write_all(&(value.ty() as u32).to_le_bytes())?;
        write_value(out, value)?;
    }
    Ok(())
}

fn write_string(out: &mut impl Write, s: &[u8]) -> io::Result<()> {
    out.write_all(&(s.len() as u64).to_le_bytes())?;
    out.write_all(s)
}

fn write_value(out: &mut impl Write, value: &GgufValue) -> io::Result<()> {
    match value {
        GgufValue::U8(v) => out.write_all(&[*v]),
        GgufValue::I8(v) => out.write_all(&v.to_le_bytes()),
        GgufValue::U16(v) => out.write_all(&v.to_le_bytes()),
        GgufValue::I16(v) => out.write_all(&v.to_le_bytes()),
        GgufValue::U32(v) => out.write_all(&v.to_le_bytes()),
        GgufValue::I32(v) => out.write_all(&v.to_le_bytes()),
        GgufValue::F32(v) => out.write_all(&v.to_le_bytes()),
        GgufValue::Bool(v) => out.write_all(&[*v as u8]),
        GgufValue::String(s) => write_string(out, s),
        GgufValue::U64(v) => out.write_all(&v.to_le_bytes()),
        GgufValue::I64(v) => out.write_all(&v.to_le_bytes()),
        GgufValue::F64(v) => out.write_all(&v.to_le_bytes()),
        GgufValue::Array(elem, values) => {
            out.write_all(&(*elem as u32).to_le_bytes())?;
            out.write_all(&(values.len() as u64).to_le_bytes())?;
            for v in values {
                if v.ty() != *elem {
                    return Err(io::Error::new(io::ErrorKind::InvalidInput, "array element of the wrong type"));
                }
                write_value(out, v)?;
            }
            Ok(())
        }
    }
}

/// llama.cpp's `tokenizer.ggml.token_type` values.
#[allow(missing_docs)] // The constants are llama.cpp's names.
pub mod token_type {
    pub const NORMAL: i64 = 1;
    pub const UNKNOWN: i64 = 2;
    pub const CONTROL: i64 = 3;
    pub const USER_DEFINED: i64 = 4;
    pub const UNUSED: i64 = 5;
    pub const BYTE: i64 = 6;
}

/// Token texts that llama.cpp treats as end-of-generation whatever their type (from
/// `llama_vocab::impl::load` in llama-vocab.cpp, which matches them by text).
pub const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
];

/// Token texts llama.cpp takes as the FIM pad / repo / file-separator tokens when the
/// metadata names none; those are end-of-generation too.
const FIM_PAD_TEXTS: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS: &[&str] = &["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"];
const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];
/// Texts llama.cpp takes as the EOT token when `tokenizer.ggml.eot_token_id` is absent.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<end_of_utterance>",
];

/// The tokenizer family of a GGUF vocabulary (`tokenizer.ggml.model`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GgufModel {
    /// `gpt2`: byte-level BPE.
    Gpt2,
    /// `llama`: SentencePiece BPE with `▁` for spaces and `<0xHH>` byte fallback.
    Llama,
}

/// The raw vocabulary of a GGUF file: texts, scores, types, and the metadata.
pub(crate) struct RawVocab<'a> {
    pub model: GgufModel,
    pub texts: Vec<&'a [u8]>,
    pub types: Vec<i64>,
    pub scores: Vec<f32>,
}

impl<'a> RawVocab<'a> {
    pub fn new(meta: &'a GgufMetadata) -> Result<Self, GgufError> {
        let model = match meta.get("tokenizer.ggml.model") {
            None => return Err(GgufError::MissingKey("tokenizer.ggml.model")),
            Some(v) => match v.as_str() {
                Some("gpt2") => GgufModel::Gpt2,
                Some("llama") => GgufModel::Llama,
                Some(other) => return Err(GgufError::UnsupportedModel(other.to_string())),
                None => return Err(GgufError::WrongType { key: "tokenizer.ggml.model" }),
            },
        };
        const TOKENS: &str = "tokenizer.ggml.tokens";
        let texts = meta
            .array(TOKENS)?
            .iter()
            .map(|v| v.as_bytes().ok_or(GgufError::WrongType { key: TOKENS }))
            .collect::<Result<Vec<_>, _>>()?;
        let n = texts.len();
        const TYPES: &str = "tokenizer.ggml.token_type";
        let types = match meta.array_of_len(TYPES, n)? {
            Some(a) => a
                .iter()
                .map(|v| v.as_i64().ok_or(GgufError::WrongType { key: TYPES }))
                .collect::<Result<Vec<_>, _>>()?,
            None => vec![token_type::NORMAL; n],
        };
        const SCORES: &str = "tokenizer.ggml.scores";
        let scores = match meta.array_of_len(SCORES, n)? {
            Some(a) => a
                .iter()
                .map(|v| v.as_f32().ok_or(GgufError::WrongType { key: SCORES }))
                .collect::<Result<Vec<_>, _>>()?,
            None => vec![0.0; n],
        };
        Ok(RawVocab { model, texts, types, scores })
    }

    /// Each token's bytes and kind (see [`Vocabulary::from_gguf`]), given the EOG ids.
    pub fn tokens(&self, eog: &[u32]) -> Result<Vec<(Vec<u8>, TokenKind)>, GgufError> {
        let table = gpt2_char_to_byte();
        let mut tokens = Vec::with_capacity(self.texts.len());
        for (id, (&text, &ty)) in self.texts.iter().zip(&self.types).enumerate() {
            let id = id as u32;
            let token = match ty {
                _ if eog.binary_search(&id).is_ok() => (text.to_vec(), TokenKind::Control),
                token_type::NORMAL => match self.model {
                    GgufModel::Gpt2 => (gpt2_decode(text, &table), TokenKind::Normal),
                    GgufModel::Llama => (unescape_spm(text), TokenKind::Normal),
                },
                token_type::BYTE => match self.model {
                    GgufModel::Llama => match parse_byte_token(text) {
                        Some(b) => (vec![b], TokenKind::Byte),
                        None => {
                            let text = String::from_utf8_lossy(text).into_owned();
                            return Err(GgufError::BadByteToken { id, text });
                        }
                    },
                    // llama.cpp does not render byte tokens of BPE vocabularies.
                    GgufModel::Gpt2 => (text.to_vec(), TokenKind::Unused),
                },
                token_type::USER_DEFINED => (text.to_vec(), TokenKind::UserDefined),
                token_type::CONTROL => (text.to_vec(), TokenKind::Control),
                _ => (text.to_vec(), TokenKind::Unused),
            };
            tokens.push(token);
        }
        Ok(tokens)
    }

    /// The end-of-generation ids, as llama.cpp builds them: the FIM pad/repo/sep tokens,
    /// every token whose text is in [`EOG_TEXTS`], and the EOS, EOT and EOM ids (from the
    /// metadata, the EOT also found by text as llama.cpp does).
    pub fn eog_ids(&self, meta: &GgufMetadata) -> Vec<u32> {
        let n = self.texts.len() as u64;
        let id_of = |key: &str| meta.get_u64(key).filter(|&id| id < n).map(|id| id as u32);
        // llama.cpp's text → id map keeps the last id of a duplicated text.
        let by_text = |texts: &[&str]| -> Option<u32> {
            texts.iter().find_map(|t| self.texts.iter().rposition(|x| *x == t.as_bytes()).map(|i| i as u32))
        };
        let mut eog = Vec::new();
        for (key, texts) in [
            ("tokenizer.ggml.fim_pad_token_id", FIM_PAD_TEXTS),
            ("tokenizer.ggml.fim_rep_token_id", FIM_REP_TEXTS),
            ("tokenizer.ggml.fim_sep_token_id", FIM_SEP_TEXTS),
            ("tokenizer.ggml.eot_token_id", EOT_TEXTS),
        ] {
            eog.extend(id_of(key).or_else(|| by_text(texts)));
        }
        for (id, text) in self.texts.iter().enumerate() {
            if EOG_TEXTS.iter().any(|t| t.as_bytes() == *text) {
                eog.push(id as u32);
            }
        }
        eog.extend(id_of("tokenizer.ggml.eos_token_id"));
        eog.extend(id_of("tokenizer.ggml.eom_token_id"));
        eog.sort_unstable();
        eog.dedup();
        eog
    }
}

/// The GPT-2 byte-level table: byte → the char that stands for it in token texts.
pub(crate) fn gpt2_byte_to_char() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut next = 256u32;
    for b in 0..=255u8 {
        let printable = matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        table[b as usize] = if printable {
            b as char
        } else {
            let c = char::from_u32(next).expect("below the surrogates");
            next += 1;
            c
        };
    }
    table
}

/// The inverse of [`gpt2_byte_to_char`]: char → byte.
pub(crate) fn gpt2_char_to_byte() -> HashMap<char, u8> {
    gpt2_byte_to_char().iter().enumerate().map(|(b, &c)| (c, b as u8)).collect()
}

/// Maps a byte-level token text back to its bytes; a char outside the table (not seen in
/// real vocabularies) is kept as its own UTF-8.
pub(crate) fn gpt2_decode(text: &[u8], table: &HashMap<char, u8>) -> Vec<u8> {
    let s = String::from_utf8_lossy(text);
    let mut out = Vec::with_capacity(text.len());
    for c in s.chars() {
        match table.get(&c) {
            Some(&b) => out.push(b),
            None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    out
}

/// The byte of an SPM byte token `<0xHH>`.
pub(crate) fn parse_byte_token(text: &[u8]) -> Option<u8> {
    match text {
        [b'<', b'0', b'x', h, l, b'>'] => u8::from_str_radix(std::str::from_utf8(&[*h, *l]).ok()?, 16).ok(),
        _ => None,
    }
}

/// Replaces SentencePiece's `▁` (U+2581) with a space.
pub(crate) fn unescape_spm(text: &[u8]) -> Vec<u8> {
    const LOWER_ONE_EIGHTH: &[u8] = "\u{2581}".as_bytes();
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i..].starts_with(LOWER_ONE_EIGHTH) {
            out.push(b' ');
            i += LOWER_ONE_EIGHTH.len();
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    out
}

impl Vocabulary {
    /// The vocabulary of a GGUF model file (plain or gzip-compressed), reading only its
    /// metadata.
    ///
    /// Token bytes are what llama.cpp's `token_to_piece` gives: for `gpt2` models the
    /// byte-level text mapped back to bytes (`Ġthe` → ` the`); for `llama` (SentencePiece)
    /// models `▁` → space and byte tokens `<0xHH>` → that byte. Token types map to kinds:
    /// normal → [`TokenKind::Normal`], byte → [`TokenKind::Byte`], user-defined →
    /// [`TokenKind::UserDefined`] (raw text, matched as text: llama.cpp emits it verbatim;
    /// Gemma 3's are whitespace runs and HTML-like tags), control →
    /// [`TokenKind::Control`] (bytes = text), unknown/unused/other →
    /// [`TokenKind::Unused`]. The EOS ids are llama.cpp's end-of-generation set (see
    /// [`EOG_TEXTS`]); an EOG token that is not typed control is made control, as
    /// llama.cpp does. The mask width is the token count.
    ///
    /// ```no_run
    /// let vocab = stencil_mask::Vocabulary::from_gguf("model.gguf").unwrap();
    /// println!("{} tokens, EOS {:?}", vocab.len(), vocab.eos_ids());
    /// ```
    pub fn from_gguf(path: impl AsRef<Path>) -> Result<Self, GgufError> {
        Self::from_gguf_metadata(&read_metadata_file(path)?)
    }

    /// [`Vocabulary::from_gguf`] from the bytes of a file.
    pub fn from_gguf_bytes(bytes: &[u8]) -> Result<Self, GgufError> {
        Self::from_gguf_metadata(&read_metadata(bytes)?)
    }

    /// [`Vocabulary::from_gguf`] from metadata already read.
    pub fn from_gguf_metadata(meta: &GgufMetadata) -> Result<Self, GgufError> {
        let raw = RawVocab::new(meta)?;
        let eog = raw.eog_ids(meta);
        Ok(Vocabulary::new(raw.tokens(&eog)?, eog)?)
    }
}
