//! Loading a GGUF model with llama.cpp, and the vocabulary the grammar engine sees for it:
//! read from the same file, with the logits' width as its mask width, so masks line up
//! with the logits. The chat template is rendered by `chat.rs` (`minijinja`).

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use llama_cpp_2::context::params::{LlamaContextParams, LlamaPoolingType};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use serde::Serialize;
use stencil_mask::vocab::gguf::read_metadata_file;
use stencil_mask::Vocabulary;

use crate::chat::{ChatMessage, ChatTemplate};
use crate::error::{Result, RuntimeError};
use crate::session::Session;

/// How to load a model.
#[derive(Clone, Debug)]
pub struct ModelOptions {
    /// Layers to offload to the GPU (only with the `cuda` feature; 0 = CPU only). Default:
    /// all layers when built with `cuda`, else 0.
    pub n_gpu_layers: u32,
    /// Map the file instead of reading it (default true).
    pub use_mmap: bool,
    /// A Jinja chat template that replaces the one in the GGUF file (default none: the
    /// file's own, if it has one).
    pub chat_template: Option<String>,
}

impl Default for ModelOptions {
    fn default() -> Self {
        ModelOptions { n_gpu_layers: if cfg!(feature = "cuda") { 999 } else { 0 }, use_mmap: true, chat_template: None }
    }
}

/// How to create a decoding session (a llama.cpp context).
#[derive(Clone, Debug)]
pub struct SessionOptions {
    /// Context length in tokens (prompt + output), default 4096.
    pub n_ctx: u32,
    /// Prompt tokens evaluated per forward pass, default 512.
    pub n_batch: u32,
    /// CPU threads for decoding and prompt evaluation. Default: the available cores. Use 1
    /// on shared or busy machines: llama.cpp's threads spin-wait for each other, and a
    /// descheduled thread stalls every step.
    pub n_threads: u32,
    /// Parallel sequences (beam search needs two per beam; contrastive search one per
    /// candidate, plus one), default 1.
    pub n_seq_max: u32,
    /// Hidden states for every evaluated token (llama.cpp's embeddings, pooling none), as
    /// contrastive search needs. Default false: every evaluated token then also gets its
    /// logits, which costs a little on long prompts.
    pub embeddings: bool,
    /// How llama.cpp computes attention, default [`FlashAttention::Auto`].
    pub flash_attention: FlashAttention,
}

impl Default for SessionOptions {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        SessionOptions {
            n_ctx: 4096,
            n_batch: 512,
            n_threads: cores,
            n_seq_max: 1,
            embeddings: false,
            flash_attention: FlashAttention::Auto,
        }
    }
}

/// Whether llama.cpp computes attention with its fused flash-attention kernel (llama.cpp's
/// `--flash-attn auto|on|off`).
///
/// The choice trades exactness of speculation for its speed on a CPU. ggml's CPU flash
/// attention evaluates the query rows of a forward pass one by one (below 64 rows), so
/// every row a speculative step verifies costs a whole attention pass; without it,
/// attention is matrix products over all rows at once, and verifying drafts is much
/// cheaper. But a row verified in a batch then no longer rounds exactly like a one-token
/// step: greedy output with speculation may differ from output without it where two tokens
/// nearly tie (BENCHMARKS.md measures both).
///
/// ```
/// use stencil_runtime::{FlashAttention, SessionOptions};
///
/// let options = SessionOptions { flash_attention: FlashAttention::Off, ..Default::default() };
/// assert_eq!("off".parse::<FlashAttention>(), Ok(options.flash_attention));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FlashAttention {
    /// llama.cpp decides: on where the backend has the kernel (the CPU, most GPUs).
    #[default]
    Auto,
    /// The fused kernel.
    On,
    /// Separate matrix products and softmax.
    Off,
}

impl std::str::FromStr for FlashAttention {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "auto" => Ok(FlashAttention::Auto),
            "on" => Ok(FlashAttention::On),
            "off" => Ok(FlashAttention::Off),
            other => Err(format!("flash attention is auto, on or off, not {other:?}")),
        }
    }
}

impl FlashAttention {
    fn policy(self) -> llama_cpp_sys_2::llama_flash_attn_type {
        match self {
            FlashAttention::Auto => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_AUTO,
            FlashAttention::On => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_ENABLED,
            FlashAttention::Off => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_DISABLED,
        }
    }
}

/// What a generation record says about the model.
#[derive(Clone, Debug, Serialize)]
pub struct ModelInfo {
    /// `general.name` from the GGUF metadata, else the file name.
    pub name: String,
    pub path: PathBuf,
    /// Width of the logits (and of the masks).
    pub n_vocab: usize,
    pub n_ctx_train: u32,
    pub n_params: u64,
    pub size_bytes: u64,
    pub has_chat_template: bool,
}

/// A loaded GGUF model: llama.cpp's weights, the engine's vocabulary (mask width = logits
/// width), and the chat template when the model has one.
///
/// ```no_run
/// use stencil_runtime::{Model, ModelOptions, SessionOptions};
/// let model = Model::load("model.gguf", &ModelOptions::default()).unwrap();
/// let mut session = model.session(&SessionOptions::default()).unwrap();
/// # let _ = &mut session;
/// ```
pub struct Model {
    llama: LlamaModel,
    vocab: Arc<Vocabulary>,
    chat_template: Option<ChatTemplate>,
    info: ModelInfo,
    add_bos: bool,
    /// The BOS token's text, to avoid a second BOS before a template that writes one.
    bos_text: String,
}

/// llama.cpp's process-wide backend, started once.
pub(crate) fn backend() -> Result<&'static LlamaBackend> {
    static BACKEND: OnceLock<std::result::Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            let mut backend = LlamaBackend::init().map_err(|e| e.to_string())?;
            if std::env::var_os("STENCIL_LLAMA_LOG").is_none() {
                backend.void_logs();
            }
            Ok(backend)
        })
        .as_ref()
        .map_err(|e| RuntimeError::Backend(e.clone()))
}

impl Model {
    /// Loads `path`.
    pub fn load(path: impl AsRef<Path>, options: &ModelOptions) -> Result<Model> {
        Self::load_with_progress(path, options, |_| true)
    }

    /// Loads `path`, calling `progress` with the fraction loaded (return false to cancel).
    pub fn load_with_progress(
        path: impl AsRef<Path>,
        options: &ModelOptions,
        progress: impl FnMut(f32) -> bool + 'static,
    ) -> Result<Model> {
        let path = path.as_ref();
        if !path.is_file() {
            return Err(RuntimeError::ModelMissing(path.to_path_buf()));
        }
        let meta = read_metadata_file(path)
            .map_err(|e| RuntimeError::Vocabulary { path: path.to_path_buf(), reason: e.to_string() })?;
        let vocab = Vocabulary::from_gguf_metadata(&meta)
            .map_err(|e| RuntimeError::Vocabulary { path: path.to_path_buf(), reason: e.to_string() })?;
        let params = LlamaModelParams::default()
            .with_n_gpu_layers(options.n_gpu_layers)
            .with_use_mmap(options.use_mmap)
            .with_progress_callback(progress);
        let llama = LlamaModel::load_from_file(backend()?, path, &params)
            .map_err(|e| RuntimeError::ModelLoad { path: path.to_path_buf(), reason: e.to_string() })?;
        let n_vocab = usize::try_from(llama.n_vocab()).unwrap_or(0);
        if vocab.len() > n_vocab {
            return Err(RuntimeError::VocabularyMismatch { ours: vocab.len(), logits: n_vocab });
        }
        let vocab = vocab
            .with_mask_width(n_vocab)
            .map_err(|e| RuntimeError::Vocabulary { path: path.to_path_buf(), reason: e.to_string() })?;
        let token_text = |key: &str| {
            meta.get_u64(key)
                .and_then(|id| u32::try_from(id).ok())
                .filter(|&id| (id as usize) < vocab.len())
                .map(|id| String::from_utf8_lossy(vocab.token_bytes(id)).into_owned())
                .unwrap_or_default()
        };
        let bos_text = token_text("tokenizer.ggml.bos_token_id");
        let chat_template = match options.chat_template.as_deref().or(meta.get_str("tokenizer.chat_template")) {
            Some(source) => Some(ChatTemplate::new(source, &bos_text, &token_text("tokenizer.ggml.eos_token_id"))?),
            None => None,
        };
        let name = meta
            .get_str("general.name")
            .map(str::to_string)
            .unwrap_or_else(|| path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default());
        let info = ModelInfo {
            name,
            path: path.to_path_buf(),
            n_vocab,
            n_ctx_train: llama.n_ctx_train(),
            n_params: llama.n_params(),
            size_bytes: llama.size(),
            has_chat_template: chat_template.is_some(),
        };
        let add_bos = llama.vocab().should_add_bos();
        Ok(Model { llama, vocab: Arc::new(vocab), chat_template, info, add_bos, bos_text })
    }

    /// The vocabulary to compile grammars against: its mask width is the logits width.
    pub fn vocab(&self) -> &Arc<Vocabulary> {
        &self.vocab
    }

    /// Name, path and sizes, for records.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// The model's chat template, when its GGUF has one.
    pub fn chat_template(&self) -> Option<&ChatTemplate> {
        self.chat_template.as_ref()
    }

    /// The llama.cpp model, for what this crate does not wrap.
    pub fn llama(&self) -> &LlamaModel {
        &self.llama
    }

    /// Tokenizes `text` with the model's own tokenizer; special-token texts such as
    /// `<|im_start|>` become their tokens; BOS is prepended when the model asks for it and
    /// the text does not already start with it (chat templates often write it).
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        let starts_with_bos = !self.bos_text.is_empty() && text.starts_with(&self.bos_text);
        let add_special = self.add_bos && !starts_with_bos;
        self.llama.vocab().tokenize(text.as_bytes(), add_special, true).into_iter().map(|t| t.0 as u32).collect()
    }

    /// The prompt text for `prompt`: raw text as is, chat messages through the template,
    /// token ids as their text (control tokens' included).
    pub fn render_prompt(&self, prompt: &Prompt) -> Result<String> {
        match prompt {
            Prompt::Text(text) => Ok(text.clone()),
            Prompt::Tokens(tokens) => {
                let bytes: Vec<u8> = tokens
                    .iter()
                    .filter(|&&t| (t as usize) < self.vocab.len())
                    .flat_map(|&t| self.vocab.token_bytes(t).iter().copied())
                    .collect();
                Ok(String::from_utf8_lossy(&bytes).into_owned())
            }
            Prompt::Chat(messages) => {
                let template = self.chat_template.as_ref().ok_or(RuntimeError::NoChatTemplate)?;
                template.render(messages, true, None)
            }
        }
    }

    /// The prompt's tokens: token ids as they are, text and chat messages rendered
    /// ([`render_prompt`](Self::render_prompt)) and tokenized.
    pub fn encode_prompt(&self, prompt: &Prompt) -> Result<Vec<u32>> {
        match prompt {
            Prompt::Tokens(tokens) => Ok(tokens.clone()),
            _ => Ok(self.tokenize(&self.render_prompt(prompt)?)),
        }
    }

    /// A decoding session with its own context (KV cache).
    pub fn session(&self, options: &SessionOptions) -> Result<Session<'_>> {
        Ok(Session::new(self, self.context(options)?, options.clone()))
    }

    /// A llama.cpp context for `options` (unified KV cache).
    pub(crate) fn context(&self, options: &SessionOptions) -> Result<LlamaContext<'_>> {
        let threads = i32::try_from(options.n_threads.max(1)).unwrap_or(1);
        let mut params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(options.n_ctx.max(16)))
            .with_n_batch(options.n_batch.max(1))
            .with_n_ubatch(options.n_batch.max(1))
            .with_n_seq_max(options.n_seq_max.max(1))
            .with_kv_unified(true)
            .with_n_threads(threads)
            .with_n_threads_batch(threads)
            .with_flash_attention_policy(options.flash_attention.policy());
        if options.embeddings {
            params = params.with_embeddings(true).with_pooling_type(LlamaPoolingType::None);
        }
        self.llama.new_context(backend()?, params).map_err(|e| RuntimeError::Context(e.to_string()))
    }
}

/// What the model is asked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Prompt {
    /// Text given to the model as is (base models, or a prompt already formatted).
    Text(String),
    /// Messages rendered with the model's chat template, ending where the assistant's
    /// reply starts.
    Chat(Vec<ChatMessage>),
    /// Token ids, evaluated as they are (no BOS added).
    Tokens(Vec<u32>),
}

impl Prompt {
    /// One user message when the model has a chat template, else the text itself.
    pub fn user_or_text(model: &Model, text: impl Into<String>) -> Prompt {
        let text = text.into();
        if model.chat_template().is_some() {
            Prompt::Chat(vec![ChatMessage::user(text)])
        } else {
            Prompt::Text(text)
        }
    }
}
