//! gpt-oss's Harmony format: a reply is a run of channel messages. Reasoning is the
//! `analysis` channel, text for the user the `final` channel (or, before calls, a
//! `commentary` preamble), and a call a `commentary` message addressed to the function:
//!
//! ```text
//! <|channel|>analysis<|message|>The user wants the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>
//! ```
//!
//! (The generation prompt ends with `<|start|>assistant`.) A call may also put its recipient
//! before the channel, as gpt-oss's template renders past calls: `<|start|>assistant` then
//! ` to=functions.NAME<|channel|>commentary json<|message|>{…}<|call|>`; ` <|constrain|>json`
//! (or ` json` in that form) is optional. Parallel calls follow each other, each after
//! `<|start|>assistant`. With `auto` the reply is either a `final` message or (preambles
//! and) calls; `none` is a `final` message. Every marker is a token of gpt-oss's vocabulary.
//! The model ends a call with `<|call|>`, which is an end-of-generation token: a reply that
//! the model ended there is read with it ([`super::CompiledFormat::read_ended`]). Tool names
//! are written raw: no whitespace nor `<`.

use serde_json::{json, Value};

use super::build::{or, seq, text, Builder};
use super::{FormatError, ReasoningMode, Role};
use crate::call::ToolCall;

pub(super) const ANALYSIS: &str = "<|channel|>analysis<|message|>";
pub(super) const END: &str = "<|end|>";
pub(super) const CALL: &str = "<|call|>";

pub(super) fn build(b: &mut Builder, allowed: &[usize]) -> Result<Value, FormatError> {
    let channel = b.marker("<|channel|>");
    let message = b.marker("<|message|>");
    let end = b.marker(END);
    let start = b.marker("<|start|>");
    let constrain = b.marker("<|constrain|>");
    let call_end = b.marker(CALL);
    let next = seq(vec![start.node(), text("assistant")]);
    // A message of `name` whose text is its content, and the next message's start.
    let channel_message = |b: &mut Builder, name: &str, role: Role, budget: Option<u32>| {
        let body = seq(vec![message.node(), b.free_text(&[], budget)]);
        let tag = b.block(&super::build::Piece::Text(name.into()), body, &end, role)?;
        Ok::<Value, FormatError>(seq(vec![channel.node(), tag.node, next.clone()]))
    };
    let analysis = channel_message(b, "analysis", Role::Reasoning, b.spec.reasoning_budget)?;
    let preamble = channel_message(b, "commentary", Role::Content, None)?;
    let final_message = seq(vec![channel.node(), text("final"), message.node(), b.answer()]);
    let mut calls = Vec::new();
    for &i in allowed {
        let name = b.name(i);
        let constrained = json!({"type": "optional", "content": seq(vec![text(" "), constrain.node(), text("json")])});
        let in_channel = b.unit(
            std::slice::from_ref(&channel),
            format!("commentary to=functions.{name}"),
            &[],
            vec![constrained, message.node(), b.json_arguments(i)],
            Some(call_end.clone()),
            Role::Call(i),
        )?;
        let in_role = b.unit(
            &[],
            format!(" to=functions.{name}"),
            &[],
            vec![
                channel.node(),
                text("commentary"),
                json!({"type": "optional", "content": text(" json")}),
                message.node(),
                b.json_arguments(i),
            ],
            Some(call_end.clone()),
            Role::Call(i),
        )?;
        calls.push(in_channel.node);
        calls.push(in_role.node);
    }
    let body = if calls.is_empty() {
        final_message
    } else {
        let call = or(calls);
        let calls = if b.spec.parallel {
            seq(vec![call.clone(), json!({"type": "star", "content": seq(vec![next.clone(), call])})])
        } else {
            call
        };
        let preambles_and_calls = seq(vec![json!({"type": "star", "content": preamble}), calls]);
        match b.spec.choice {
            crate::ToolChoice::Auto => or(vec![final_message, preambles_and_calls]),
            _ => preambles_and_calls,
        }
    };
    Ok(match b.spec.reasoning {
        ReasoningMode::Off => body,
        ReasoningMode::Optional => seq(vec![json!({"type": "optional", "content": analysis}), body]),
        ReasoningMode::Required | ReasoningMode::Open => seq(vec![analysis, body]),
    })
}

pub(super) fn write_reasoning(reasoning: &str) -> String {
    format!("{ANALYSIS}{reasoning}{END}<|start|>assistant")
}

pub(super) fn write(content: &str, calls: &[ToolCall]) -> String {
    if calls.is_empty() {
        return format!("<|channel|>final<|message|>{content}");
    }
    let mut out = String::new();
    if !content.is_empty() {
        out.push_str(&format!("<|channel|>commentary<|message|>{content}{END}<|start|>assistant"));
    }
    let calls: Vec<String> = calls
        .iter()
        .map(|c| {
            format!("<|channel|>commentary to=functions.{} <|constrain|>json<|message|>{}{CALL}", c.name, c.arguments)
        })
        .collect();
    out.push_str(&calls.join("<|start|>assistant"));
    out
}
