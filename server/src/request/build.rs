//! A prepared request made into what the engine runs: the prompt rendered (by the chat
//! template, or by `stencil-tools` for a conversation with tools) and measured,
//! `max_tokens` fitted to the context, the speculation resolved, and the constraint
//! compiled (or found in the cache).

use std::sync::Arc;

use stencil_runtime::{GenerateRequest, Model, Prompt, Speculation};

use super::{Prepared, ToolRequest};
use stencil_tools::format::{ReasoningMode, ToolFormat};
use stencil_tools::ToolChoice;

use crate::constraint::{tool_reply, Constraint, GrammarCache, ToolSpec};
use crate::engine::runtime_error;
use crate::error::ApiError;

/// What building a request needs of the server's settings.
#[derive(Clone, Debug)]
pub struct Serving {
    /// The context in tokens, shared by all sequences.
    pub ctx_size: usize,
    /// Sequences decoded together: without `max_tokens`, a completion may use its
    /// sequence's share of the context.
    pub parallel: usize,
    /// The most tokens a completion without `max_tokens` may have.
    pub max_tokens_limit: u32,
    /// The speculation of requests whose `speculation` field does not choose.
    pub speculation: Option<Speculation>,
    /// Whether the server has a draft model.
    pub has_draft: bool,
    /// The tool format of requests without `tool_format` (`--tool-format`); `None`: the
    /// one recognized from the chat template, else the envelope.
    pub tool_format: Option<String>,
    /// The reasoning budget of requests without `reasoning_budget` (`--reasoning-budget`).
    pub reasoning_budget: Option<u32>,
}

/// Renders and measures the prompt, fixes `max_tokens`, resolves the speculation, and
/// compiles the constraint (through `cache`): the engine's request, and the constraint
/// the answer reads the output back with.
///
/// # Errors
///
/// A 400 for a prompt that renders empty or does not fit the context with `n ×
/// max_tokens` (code `context_length_exceeded`), a constraint that does not compile, a
/// conversation the tools cannot render, or speculation the server cannot do.
pub fn build(
    p: &Prepared,
    model: &Model,
    cache: &GrammarCache,
    serving: &Serving,
) -> Result<(GenerateRequest, Option<Arc<Constraint>>), ApiError> {
    let (prompt, constraint) = prompt_and_constraint(p, model, cache, serving)?;
    let text = model.render_prompt(&prompt).map_err(runtime_error)?;
    let prompt_tokens = model.tokenize(&text).len();
    if prompt_tokens == 0 {
        return Err(ApiError::invalid("the prompt is empty", None));
    }
    let mut params = p.params.clone();
    params.max_tokens = max_tokens(p, prompt_tokens, serving)?;
    let mut request = GenerateRequest::new(prompt).with_params(params);
    request.preset = p.preset.clone();
    request.top_logprobs = p.top_logprobs;
    request.speculation = p.speculation.resolve(serving.speculation.as_ref(), serving.has_draft)?;
    if let Some(g) = constraint.as_ref().and_then(|c| c.grammar.clone()) {
        request = request.with_grammar(g, constraint.as_ref().map_or("none", |c| c.label));
    }
    // The tag's reasoning budgets, counted by the decode loop (its grammar is `g`).
    request.structural_tag = constraint.as_ref().and_then(|c| c.tag.clone());
    Ok((request, constraint))
}

/// `max_tokens` for a prompt of `prompt_tokens`: the request's own when the prompt and
/// `n` completions of it fit the context; without one, a share of the context per
/// sequence less the prompt (a prompt longer than its share may use what is left of the
/// whole context), at most [`Serving::max_tokens_limit`].
fn max_tokens(p: &Prepared, prompt_tokens: usize, serving: &Serving) -> Result<u32, ApiError> {
    let (ctx, n) = (serving.ctx_size, p.n);
    let param = if matches!(p.prompt, Prompt::Chat(_)) { "messages" } else { "prompt" };
    let too_long = |completion: usize| {
        ApiError::invalid(
            format!(
                "this model's maximum context length is {ctx} tokens; you requested {} tokens ({prompt_tokens} in the \
                 prompt, {n} x {completion} for the completion); shorten the prompt or lower max_tokens or n",
                prompt_tokens + n * completion
            ),
            Some(param),
        )
        .with_code("context_length_exceeded")
    };
    let budget = ctx.saturating_sub(prompt_tokens) / n;
    if budget == 0 {
        return Err(too_long(1));
    }
    Ok(match p.max_tokens {
        Some(m) if prompt_tokens + n * m as usize > ctx => return Err(too_long(m as usize)),
        Some(m) => m,
        None => {
            let share = (ctx / serving.parallel).saturating_sub(prompt_tokens);
            let room = if share > 0 { share.min(budget) } else { budget };
            room.min(serving.max_tokens_limit as usize) as u32
        }
    })
}

/// The prompt and the constraint: the request's own (a chat rendered with its
/// `chat_template_kwargs`), or for tools the prompt rendered by `stencil-tools` (tool
/// definitions, earlier calls and results) and the grammar of the reply in the tool format.
fn prompt_and_constraint(
    p: &Prepared,
    model: &Model,
    cache: &GrammarCache,
    serving: &Serving,
) -> Result<(Prompt, Option<Arc<Constraint>>), ApiError> {
    let thinking = p.tools.is_none().then(|| thinking(p, model)).flatten();
    let Some(t) = p.tools.as_ref().or(thinking.as_ref()) else {
        let prompt = match (&p.prompt, model.chat_template()) {
            (Prompt::Chat(messages), Some(template)) if !p.template_kwargs.is_empty() => {
                Prompt::Text(template.render_with(messages, true, None, &p.template_kwargs).map_err(runtime_error)?)
            }
            (prompt, _) => prompt.clone(),
        };
        return Ok((prompt, cache.get_or_compile(&p.constraint, model.vocab())?));
    };
    let mut spec = t.spec.clone();
    spec.format = spec.format.or_else(|| serving.tool_format.clone());
    spec.reasoning_budget = spec.reasoning_budget.or(serving.reasoning_budget);
    let caller = cache.get_or_compile_tools(&spec, model)?;
    let caller = caller.tools.as_ref().expect("tools constraints have a caller");
    let mut options = spec.call_options();
    options.template_kwargs = p.template_kwargs.clone();
    // A `response_format` (with `tool_choice: none`, or reasoning without tools) applies to
    // the answer after the reasoning; compiled alone first, so that a schema is refused as
    // it would be without tools, and kept to validate the answer.
    let answer = cache.get_or_compile(&p.constraint, model.vocab())?;
    options.answer = p.constraint.answer_format()?;
    let text = caller.render(model, &t.conversation, &options).map_err(|e| match e {
        stencil_tools::ToolError::Runtime(e) => runtime_error(e),
        other => ApiError::invalid(other.to_string(), Some("messages")),
    })?;
    let mut constraint = tool_reply(caller, &options, &text)?;
    constraint.schema = answer.and_then(|a| a.schema.clone());
    Ok((Prompt::Text(text), Some(Arc::new(constraint))))
}

/// A chat request without tools to a model whose chat template thinks (its tool format's
/// reasoning markers, optional or opened by the rendered prompt): a reply without calls in
/// that format, so that the reasoning comes back apart and a `response_format` applies
/// after it.
fn thinking(p: &Prepared, model: &Model) -> Option<ToolRequest> {
    let Prompt::Chat(messages) = &p.prompt else { return None };
    let template = model.chat_template()?;
    let format = ToolFormat::detect(template.source())?;
    let rendered = template.render_with(messages, true, None, &p.template_kwargs).ok()?;
    if format.reasoning_for(template.source(), &rendered) == ReasoningMode::Off {
        return None;
    }
    let spec = ToolSpec {
        tools: serde_json::json!([]),
        choice: ToolChoice::None,
        parallel: false,
        format: None,
        reasoning: None,
        reasoning_budget: None,
    };
    Some(ToolRequest { spec, conversation: messages.clone() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{parse_chat, parse_completion, prepare_chat, prepare_completion, Limits};

    const LIMITS: Limits = Limits { max_n: 4, max_tokens: 4000 };

    /// 4,096 tokens over 4 sequences, completions of at most 512 without `max_tokens`.
    fn serving() -> Serving {
        Serving {
            ctx_size: 4096,
            parallel: 4,
            max_tokens_limit: 512,
            speculation: None,
            has_draft: false,
            tool_format: None,
            reasoning_budget: None,
        }
    }

    fn chat(extra: serde_json::Value) -> Prepared {
        let mut body = serde_json::json!({"messages": [{"role": "user", "content": "x"}]});
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        prepare_chat(parse_chat(body.to_string().as_bytes()).unwrap(), &LIMITS).unwrap()
    }

    #[test]
    fn max_tokens_as_asked_when_it_fits() {
        let p = chat(serde_json::json!({"max_tokens": 1000, "n": 2}));
        assert_eq!(max_tokens(&p, 2000, &serving()).unwrap(), 1000);
        assert_eq!(max_tokens(&p, 2096, &serving()).unwrap(), 1000, "2,096 + 2 × 1,000 is the whole context");
        let e = max_tokens(&p, 2097, &serving()).unwrap_err();
        assert_eq!((e.param.as_deref(), e.code.as_deref()), (Some("messages"), Some("context_length_exceeded")));
        assert!(e.message.contains("you requested 4097 tokens (2097 in the prompt, 2 x 1000"), "{}", e.message);
    }

    #[test]
    fn without_max_tokens_a_share_of_the_context() {
        let p = chat(serde_json::json!({}));
        // A share is 4,096 / 4 = 1,024 tokens, less the prompt, at most the limit (512).
        assert_eq!(max_tokens(&p, 100, &serving()).unwrap(), 512);
        assert_eq!(max_tokens(&p, 600, &serving()).unwrap(), 424);
        // A prompt longer than its share: what is left of the whole context, at most the limit.
        assert_eq!(max_tokens(&p, 2000, &serving()).unwrap(), 512);
        assert_eq!(max_tokens(&p, 3800, &serving()).unwrap(), 296);
        // n completions share what is left.
        let p = chat(serde_json::json!({"n": 4}));
        assert_eq!(max_tokens(&p, 3800, &serving()).unwrap(), 74);
    }

    #[test]
    fn a_prompt_that_fills_the_context_is_refused() {
        let p = chat(serde_json::json!({"n": 2}));
        let e = max_tokens(&p, 4095, &serving()).unwrap_err();
        assert_eq!(e.code.as_deref(), Some("context_length_exceeded"));
        assert!(e.message.contains("2 x 1 for the completion"), "{}", e.message);
        let body = serde_json::json!({"prompt": "x"}).to_string();
        let p = prepare_completion(parse_completion(body.as_bytes()).unwrap(), &LIMITS).unwrap();
        assert_eq!(max_tokens(&p, 4096, &serving()).unwrap_err().param.as_deref(), Some("prompt"));
    }
}
