"""Type stubs of the native module `stencil._stencil` (the Rust engine, through PyO3).

Everything here is re-exported by `stencil`; import it from there.
"""

from typing import Any, Sequence

class StencilError(Exception):
    """Base class of every error the engine raises."""

class VocabError(StencilError):
    """A vocabulary could not be read (bad GGUF, bad tokenizer.json, no EOS id...)."""

class CompileError(StencilError):
    """A grammar, schema, regex or tool set could not be compiled.

    The message locates the problem: a JSON pointer into the schema, a line and column in
    the GBNF, the rule and pattern of a regex.
    """

class MatchError(StencilError):
    """A matcher hit an engine limit (work per step, items per step) or was misused
    (rolling back more tokens than it accepted)."""

class Vocab:
    """A tokenizer's vocabulary as the engine sees it: token id -> bytes, the EOS ids, and
    the mask width (the model's logits count, which may exceed the tokenizer's size; the
    padding ids are never allowed). Immutable; share one between compilers and threads."""

    @staticmethod
    def from_gguf(path: str, vocab_size: int | None = None) -> Vocab:
        """The vocabulary stored in a GGUF model file (token texts, types and the
        end-of-generation ids llama.cpp would use)."""
    @staticmethod
    def from_tokenizer_json(
        json: str, eos_ids: Sequence[int] | None = None, vocab_size: int | None = None
    ) -> Vocab:
        """From the *text* of a Hugging Face `tokenizer.json`. Without `eos_ids` the
        end-of-generation tokens are found by name (`</s>`, `<|im_end|>`, `<eos>`, ...)."""
    @staticmethod
    def from_huggingface(
        tokenizer: Any, vocab_size: int | None = None, eos_ids: Sequence[int] | None = None
    ) -> Vocab:
        """From a `transformers` fast tokenizer (its `backend_tokenizer.to_str()`); EOS is
        `eos_ids`, else the tokenizer's `eos_token_id` plus the end-of-generation tokens
        found by name. `vocab_size`: the model's logits width (`model.config.vocab_size`)."""
    @staticmethod
    def from_tokens(
        tokens: Sequence[bytes | None],
        eos_ids: Sequence[int],
        special_ids: Sequence[int] = (),
        vocab_size: int | None = None,
    ) -> Vocab:
        """From raw token bytes per id (`None`: an unused id). Ids in `special_ids` and
        `eos_ids` are control tokens: they never match grammar text."""
    @property
    def size(self) -> int:
        """The mask width: bits per bitmask row (>= `len(vocab)`)."""
    @property
    def eos_ids(self) -> list[int]: ...
    def token_bytes(self, token: int) -> bytes: ...
    def is_text(self, token: int) -> bool:
        """True when the token can match grammar text (not a control or unused token)."""
    def __len__(self) -> int:
        """Number of token ids the tokenizer defines."""

class Grammar:
    """A grammar compiled against one vocabulary. Immutable and thread-safe: any number
    of matchers on any threads share it."""

    @property
    def vocab(self) -> Vocab: ...
    @property
    def warnings(self) -> list[str]:
        """JSON Schema keywords the grammar does not enforce (lenient mode only), each as
        `pointer: keyword: reason`. Check outputs with `validate` when this is not empty."""
    @property
    def source_kind(self) -> str:
        """"json_schema", "gbnf", "regex", "tools" or "json"."""
    def validate(self, text: str) -> list[str]:
        """For a JSON Schema grammar: the post-hoc validation errors of `text` (empty when
        valid; a parse error is one entry). Other grammars: whether the grammar's reference
        recognizer accepts the text (`[]` when it does)."""
    def warm_up(self) -> None:
        """Computes every state's token-mask cache now (in parallel), so that no later mask
        pays a first-visit cost."""
    def stats(self) -> dict[str, int]: ...

class Compiler:
    """Compiles grammars against one vocabulary (XGrammar's `GrammarCompiler` shape).
    Compiling releases the GIL."""

    def __init__(self, vocab: Vocab) -> None: ...
    @property
    def vocab(self) -> Vocab: ...
    def compile_json_schema(
        self,
        schema: str | dict | bool,
        *,
        whitespace: str = "compact",
        indent: int | None = None,
        separators: tuple[str, str] | None = None,
        strict: bool = True,
        property_order: str = "schema",
    ) -> Grammar:
        """JSON Schema (drafts 4 to 2020-12) as text or a parsed value.

        whitespace: "compact" (no whitespace but the separators) or "flexible" (runs of at
        most 2 of `[ \\t\\n]` around structural tokens); `indent`: pretty-printing with that
        many spaces (serde_json / `json.dumps(indent=n)` style), overrides `whitespace`;
        separators: (item, key), default (",", ":") compact and (", ", ": ") otherwise;
        strict: refuse keywords the grammar cannot enforce (else compile, list them in
        `Grammar.warnings`); property_order: "schema" (declared order) or "any".
        An unknown `whitespace` or `property_order` value is a ValueError; a schema that
        cannot be compiled is a CompileError."""
    def compile_grammar(self, gbnf: str) -> Grammar:
        """A GBNF grammar (llama.cpp's dialect, with its `root` rule)."""
    def compile_regex(self, pattern: str) -> Grammar:
        """A regular expression (Rust `regex` syntax), anchored at both ends."""
    def compile_builtin_json(self) -> Grammar:
        """Any JSON value (compact)."""
    def compile_tools(
        self, tools: str | list, *, parallel: bool = False, strict: bool = True
    ) -> Grammar:
        """OpenAI-style tools (`[{"type": "function", "function": {"name", "parameters"}}]`,
        as JSON text or parsed) -> a compact JSON object `{"name": ..., "arguments": {...}}`
        naming one of the tools, with arguments valid against its parameters (the name
        first, then the arguments); `parallel`: a JSON array of one or more such calls."""
    def compile_structural_tag(self, tag: str | dict, *, strict: bool = True) -> Grammar:
        """A structural tag (`{"type": "structural_tag", "format": {...}}` as XGrammar 0.2
        and vLLM take it, or the legacy `structures` + `triggers`) -> one grammar of the
        whole reply: free text, reasoning and constrained segments, exactly. Tokens named by
        text must be one token of the compiler's vocabulary. An unsupported format
        (`any_tokens`, `dispatch`, ...) is a CompileError naming its JSON pointer."""

class Matcher:
    """The parse state of one sequence against a compiled grammar.

    Not for concurrent use: give each thread its own matcher (`fork` is cheap). Calls that
    compute masks release the GIL."""

    def __init__(self, grammar: Grammar) -> None: ...
    @property
    def grammar(self) -> Grammar: ...
    @property
    def num_tokens(self) -> int:
        """Tokens accepted so far (EOS included)."""
    def consume_token(self, token: int) -> bool:
        """Accepts `token`; False (and no change) when the grammar does not allow it or the
        matcher is terminated. Accepting an EOS id where the grammar may end terminates."""
    def consume_tokens(self, tokens: Sequence[int]) -> bool:
        """Accepts all of `tokens` or none: False (and no change) when one is refused."""
    def validate_tokens(self, tokens: Sequence[int]) -> int:
        """How many leading tokens of `tokens` the grammar accepts from here, without
        advancing (for speculative decoding's draft verification)."""
    def rollback(self, num_tokens: int) -> None:
        """Undoes the last `num_tokens` accepted tokens (EOS included); MatchError when
        fewer were accepted."""
    def reset(self) -> None:
        """Back to the start of the grammar."""
    def fork(self) -> Matcher:
        """An independent copy in the same state."""
    def is_terminated(self) -> bool:
        """True once an EOS id was accepted."""
    def is_accepting(self) -> bool:
        """True when the output so far is a complete sentence of the grammar (EOS is
        allowed next), or the matcher is terminated."""
    def forced_tokens(self, limit: int = 64) -> list[int]:
        """Tokens the grammar forces next, safe to append without sampling (fast-forward)."""
    def forced_bytes(self, limit: int = 256) -> bytes:
        """The bytes every continuation starts with."""
    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0) -> None:
        """Writes the allowed-token bitmask of the next token into row `index` of `bitmask`:
        a C-contiguous int32 numpy array or CPU torch tensor of shape (rows, ceil(V/32)) or
        (ceil(V/32),), V = `vocab.size`; bit `t % 32` of word `t // 32` set = token t
        allowed (XGrammar's and llguidance's layout). A terminated matcher writes an
        all-zero row."""
    def next_token_mask(self) -> list[int]:
        """The allowed token ids (a convenience for tests and small vocabularies)."""

def fill_next_token_bitmask_batch(
    matchers: Sequence[Matcher], bitmask: Any, indices: Sequence[int] | None = None
) -> None:
    """Fills row `indices[i]` (default: i) of `bitmask` for `matchers[i]`, all in parallel on
    the engine's thread pool, with the GIL released. A matcher may appear only once."""

def bitmask_words(vocab_size: int) -> int:
    """ceil(vocab_size / 32): the int32 words of one bitmask row."""
