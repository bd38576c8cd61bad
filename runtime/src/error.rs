//! The runtime's errors.

use std::path::PathBuf;

use thiserror::Error;

/// Everything that can go wrong loading a model or generating.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum RuntimeError {
    #[error("llama.cpp backend could not start: {0}")]
    Backend(String),
    #[error("model file {0} does not exist")]
    ModelMissing(PathBuf),
    #[error("llama.cpp could not load model {path}: {reason}")]
    ModelLoad { path: PathBuf, reason: String },
    #[error("model {path}: its tokenizer metadata cannot be read: {reason}")]
    Vocabulary { path: PathBuf, reason: String },
    #[error("the model's vocabulary has {ours} tokens but its logits have {logits}")]
    VocabularyMismatch { ours: usize, logits: usize },
    #[error("the grammar was compiled for a vocabulary of {grammar} tokens, the model has {model}")]
    GrammarVocabulary { grammar: usize, model: usize },
    #[error("llama.cpp could not create a context: {0}")]
    Context(String),
    #[error("chat template: {0}")]
    ChatTemplate(String),
    #[error("the model has no chat template; give a plain text prompt instead of chat messages")]
    NoChatTemplate,
    #[error("the prompt is empty")]
    EmptyPrompt,
    /// A token prompt with an id outside the vocabulary.
    #[error("prompt token {token} is not in the vocabulary of {n_vocab} tokens")]
    PromptToken { token: u32, n_vocab: usize },
    /// A text or chat prompt on a session over a custom model, which has no tokenizer.
    #[error("this session's model has no tokenizer: give the prompt as token ids (Prompt::Tokens)")]
    NoTokenizer,
    #[error("the prompt ({prompt} tokens) and max_tokens ({max_tokens}) do not fit the context of {n_ctx} tokens")]
    ContextOverflow { prompt: usize, max_tokens: usize, n_ctx: u32 },
    /// More sequences than the session can decode together (`n` counts the KV sequences
    /// the request needs: a beam search two per beam, contrastive search `k + 2` per
    /// sample).
    #[error(
        "{n} sequences cannot be decoded together: the session has {free} free sequences (SessionOptions::n_seq_max), \
         and they need {needed} KV cells (prompt + n * max_tokens, with those already running) of the context's {n_ctx}; \
         raise n_seq_max or the context size, or lower n or max_tokens"
    )]
    TooManySequences { n: usize, free: usize, needed: usize, n_ctx: usize },
    #[error("llama.cpp decode failed: {0}")]
    Decode(String),
    /// The KV cache has no room for a forward pass's rows (llama.cpp's "no KV slot"): fewer
    /// sequences, a shorter prompt or a larger context would fit.
    #[error(
        "the KV cache has no room for this forward pass: lower the sequences or the tokens, or raise the context size"
    )]
    KvCacheFull,
    #[error(transparent)]
    Sampling(#[from] stencil_sampling::SamplingError),
    /// The grammar engine refused a token it had allowed, or failed: a bug, reported
    /// rather than hidden.
    #[error("grammar engine: {0}")]
    Matcher(#[from] stencil_mask::MatchError),
    #[error("llama.cpp's grammar sampler refused the grammar: {0}")]
    LlamaGrammar(String),
    /// A draft model whose vocabulary is not the target's.
    #[error(
        "the draft model's vocabulary differs from the target's at token {token} (target {target}, draft {draft}; \
         {target_len} and {draft_len} tokens): speculative decoding needs the same token ids and bytes"
    )]
    DraftVocabulary { token: u32, target: String, draft: String, target_len: usize, draft_len: usize },
    /// A request for draft-model speculation on a session without a draft model.
    #[error("the request speculates with a draft model, but none is attached to the session (Session::attach_draft)")]
    NoDraftModel,
    /// Speculation where it cannot apply.
    #[error("speculative decoding does not apply to {0}")]
    SpeculationUnsupported(&'static str),
    /// A structural tag's reader failed on the output (a bug: the grammar allowed it), or
    /// could not be built.
    #[error("structural tag: {0}")]
    Structural(String),
    /// Beam search asked for no beams.
    #[error("beam search needs at least one beam (n_beams)")]
    NoBeams,
    /// Contrastive search on a session without hidden states.
    #[error(
        "contrastive search needs the model's hidden states: open the session with SessionOptions::embeddings \
         (the CLI does when --penalty-alpha is set)"
    )]
    ContrastiveNeedsEmbeddings,
    /// Contrastive search combined with what it cannot run with.
    #[error("contrastive search does not combine with {0}")]
    ContrastiveUnsupported(&'static str),
}

/// Shorthand for results of this crate.
pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;
