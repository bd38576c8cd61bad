//! Real chat templates (`fixtures/templates/`, origins and licences in its README): the
//! format is recognized from each, and a conversation with calls and tool results renders
//! through it; the assistant's turn, as the template renders it, reads back (by the format's
//! captures) into the same calls and reasoning.

use serde_json::json;
use stencil_runtime::chat::{ChatMessage, ChatTemplate, ChatToolCall};
use stencil_tools::format::{CallSpec, ReasoningMode, ToolFormat};
use stencil_tools::prompt::template_renders_calls;
use stencil_tools::{ToolCall, ToolChoice, ToolSet};

struct Case {
    file: &'static str,
    format: ToolFormat,
    /// What ends the assistant's turn after its calls (not part of the reply).
    turn_end: &'static str,
    /// Whether the template renders several calls in one message.
    parallel: bool,
    /// Whether it renders the assistant's reasoning with its calls.
    reasoning: bool,
}

const EOS: &str = "</s>";

fn cases() -> Vec<Case> {
    vec![
        Case {
            file: "Qwen-Qwen3-0.6B.jinja",
            format: ToolFormat::Hermes,
            turn_end: "<|im_end|>\n",
            parallel: true,
            reasoning: true,
        },
        Case {
            file: "vllm-tool_chat_template_qwen3coder.jinja",
            format: ToolFormat::QwenXml,
            turn_end: "<|im_end|>\n",
            parallel: true,
            reasoning: false,
        },
        Case {
            file: "vllm-tool_chat_template_llama3.1_json.jinja",
            format: ToolFormat::Llama3 { python_tag: false },
            turn_end: "<|eot_id|>",
            parallel: false,
            reasoning: false,
        },
        Case {
            file: "mistralai-Mistral-Small-3.1-24B-Instruct-2503.jinja",
            format: ToolFormat::MistralJson,
            turn_end: EOS,
            parallel: true,
            reasoning: false,
        },
        Case {
            file: "Mistral-Small-3.2-24B-Instruct-2506.jinja",
            format: ToolFormat::MistralArgs,
            turn_end: EOS,
            parallel: true,
            reasoning: false,
        },
        Case {
            file: "openai-gpt-oss-120b.jinja",
            format: ToolFormat::Harmony,
            turn_end: "",
            parallel: false,
            reasoning: true,
        },
        Case {
            file: "deepseek-ai-DeepSeek-V3.1.jinja",
            format: ToolFormat::DeepSeekV31,
            turn_end: "<｜end▁of▁sentence｜>",
            parallel: true,
            reasoning: false,
        },
    ]
}

fn template(file: &str) -> ChatTemplate {
    let source = stencil_test_support::fixtures::read(&format!("templates/{file}"));
    ChatTemplate::new(&source, "<s>", EOS).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn tools() -> ToolSet {
    ToolSet::from_openai_json(
        r#"[
      {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city"},
          "days": {"type": "integer", "description": "How many days"}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "fs/read_file", "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "The path"}}, "required": ["path"]}}}
    ]"#,
    )
    .unwrap()
}

#[test]
fn each_template_is_recognized() {
    for case in cases() {
        let t = template(case.file);
        assert_eq!(ToolFormat::detect(t.source()), Some(case.format.clone()), "{}", case.file);
        assert!(template_renders_calls(&t), "{}: renders tool calls", case.file);
    }
}

#[test]
fn calls_render_through_each_template_and_read_back() {
    let tools = tools();
    let openai = tools.to_openai_json();
    for case in cases() {
        let t = template(case.file);
        let calls = if case.parallel {
            vec![
                ToolCall::new("get_weather", json!({"city": "Paris", "days": 3})),
                ToolCall::new("fs/read_file", json!({"path": "notes/a b.txt"})),
            ]
        } else {
            vec![ToolCall::new("get_weather", json!({"city": "Paris", "days": 3}))]
        };
        let ids: Vec<String> = calls.iter().map(|_| ToolFormat::new_call_id()).collect();
        let chat_calls: Vec<ChatToolCall> = calls
            .iter()
            .zip(&ids)
            .map(|(c, id)| ChatToolCall::new(id.clone(), c.name.clone(), c.arguments.clone()))
            .collect();
        let reasoning = case.reasoning.then(|| "The user wants the weather.".to_string());
        let user = ChatMessage::user("What is the weather in Paris?");
        let assistant =
            ChatMessage { reasoning_content: reasoning.clone(), ..ChatMessage::assistant_calls("", chat_calls) };
        let prompt =
            t.render(std::slice::from_ref(&user), true, Some(&openai)).unwrap_or_else(|e| panic!("{}: {e}", case.file));
        let turn = t
            .render(&[user.clone(), assistant.clone()], false, Some(&openai))
            .unwrap_or_else(|e| panic!("{}: {e}", case.file));
        let reply = turn
            .strip_prefix(prompt.as_str())
            .unwrap_or_else(|| panic!("{}: the turn does not extend the prompt:\n{prompt}\n---\n{turn}", case.file));
        let reply = reply.strip_suffix(case.turn_end).unwrap_or_else(|| panic!("{}: {reply:?}", case.file));
        let mode = case.format.reasoning_for(t.source(), &prompt);
        let spec = CallSpec {
            parallel: case.parallel,
            reasoning: if case.reasoning { ReasoningMode::Optional } else { mode },
            ..CallSpec::new(&tools, ToolChoice::Auto)
        };
        let compiled = case.format.compile(&spec).unwrap();
        let read = compiled.read(reply.as_bytes()).unwrap_or_else(|e| panic!("{}: {e}\n{reply:?}", case.file));
        assert!(read.complete, "{}: {reply:?}", case.file);
        assert_eq!(read.tool_calls(), calls, "{}: {reply:?}", case.file);
        assert_eq!(read.reasoning, reasoning, "{}: {reply:?}", case.file);
        // The next turn: the tool results render too, with their call ids (Mistral's
        // templates check them: 9 characters).
        let mut conversation = vec![user, assistant];
        for (call, id) in calls.iter().zip(&ids) {
            conversation.push(ChatMessage::tool_result(id.clone(), call.name.clone(), "{\"temp_c\": 21}"));
        }
        let next = t.render(&conversation, true, Some(&openai)).unwrap_or_else(|e| panic!("{}: {e}", case.file));
        assert!(next.contains("temp_c"), "{}: {next}", case.file);
        if matches!(case.format, ToolFormat::MistralJson | ToolFormat::MistralArgs) {
            assert!(next.contains(&ids[0]), "{}: the call id in the result: {next}", case.file);
        }
    }
}

#[test]
fn deepseek_thinking_opens_the_reasoning_in_the_prompt() {
    let t = template("deepseek-ai-DeepSeek-V3.1.jinja");
    let user = [ChatMessage::user("Hi")];
    let kwargs = json!({"thinking": true});
    let thinking = t.render_with(&user, true, None, kwargs.as_object().unwrap()).unwrap();
    assert!(thinking.ends_with("<think>"), "{thinking}");
    assert_eq!(ToolFormat::DeepSeekV31.reasoning_for(t.source(), &thinking), ReasoningMode::Open);
    let plain = t.render(&user, true, None).unwrap();
    assert_eq!(ToolFormat::DeepSeekV31.reasoning_for(t.source(), &plain), ReasoningMode::Off);
    // Open: the reply is the reasoning's text, its end, then the answer.
    let tools = tools();
    let spec = CallSpec { reasoning: ReasoningMode::Open, ..CallSpec::new(&tools, ToolChoice::Auto) };
    let compiled = ToolFormat::DeepSeekV31.compile(&spec).unwrap();
    let reply = compiled.read("Paris, then.</think>Let me look.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>".as_bytes()).unwrap();
    assert!(reply.complete);
    assert_eq!(reply.reasoning.as_deref(), Some("Paris, then."));
    assert_eq!(reply.content.as_deref(), Some("Let me look."));
    assert_eq!(reply.calls[0].name, "get_weather");
}

#[test]
fn qwen3_thinking_off_closes_the_reasoning_in_the_prompt() {
    let t = template("Qwen-Qwen3-0.6B.jinja");
    let kwargs = json!({"enable_thinking": false});
    let prompt = t.render_with(&[ChatMessage::user("Hi")], true, None, kwargs.as_object().unwrap()).unwrap();
    assert!(prompt.ends_with("<think>\n\n</think>\n\n"), "{prompt}");
    assert_eq!(ToolFormat::Hermes.reasoning_for(t.source(), &prompt), ReasoningMode::Off);
    let on = t.render(&[ChatMessage::user("Hi")], true, None).unwrap();
    assert_eq!(ToolFormat::Hermes.reasoning_for(t.source(), &on), ReasoningMode::Optional);
}
