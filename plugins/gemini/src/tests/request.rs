//! `build-request`: paths, headers, and exact bodies for system prompts, images, tools, tool
//! results, signature hand-back, thinking, JSON schemas, caps, EXTRA_BODY and bad inputs.

use polygateway_plugin_sdk::{AuthScheme, BuildError, ChatRequest, Guest};
use serde_json::json;

use super::{body, body_text, build_error, chat, source};
use crate::Gemini;

fn user(text: &str) -> serde_json::Value {
    json!({"role": "user", "content": text})
}

#[test]
fn path_headers_and_auth() {
    let mut req = chat(json!([user("hi")]), json!({}));
    let http = <Gemini as Guest>::build_request(req.clone(), source()).unwrap();
    assert_eq!(http.method, "POST");
    assert_eq!(http.path, "/v1beta/models/gemini-2.5-flash:generateContent");
    assert_eq!(http.auth, AuthScheme::Header("x-goog-api-key".into()));
    assert_eq!(http.headers.len(), 1);
    assert_eq!(
        (
            http.headers[0].name.as_str(),
            http.headers[0].value.as_str()
        ),
        ("content-type", "application/json")
    );
    req.stream = true;
    let mut s = source();
    s.model = "models/gemini-2.5-pro".into();
    let http = <Gemini as Guest>::build_request(req.clone(), s.clone()).unwrap();
    assert_eq!(
        http.path,
        "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    );
    // Streaming changes the path only, never the body.
    let streamed = String::from_utf8(http.body).unwrap();
    req.stream = false;
    assert_eq!(streamed, body_text(req.clone(), s.clone()));
    // Anything unsafe in a path segment is percent-encoded, `/` and `:` included.
    s.model = "tunedModels/x:evil?alt=json#".into();
    let http = <Gemini as Guest>::build_request(req.clone(), s.clone()).unwrap();
    assert_eq!(
        http.path,
        "/v1beta/models/tunedModels%2Fx%3Aevil%3Falt%3Djson%23:generateContent"
    );
    s.model = "  ".into();
    assert!(matches!(
        <Gemini as Guest>::build_request(req, s),
        Err(BuildError::Unsupported(_))
    ));
}

#[test]
fn system_and_user_turns() {
    let messages = json!([
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Say hello."}
    ]);
    assert_eq!(
        body_text(chat(messages, json!({})), source()),
        r#"{"contents":[{"role":"user","parts":[{"text":"Say hello."}]}],"systemInstruction":{"parts":[{"text":"You are terse."}]}}"#
    );
    // Developer messages join the system instruction in order, wherever they are;
    // consecutive user messages merge into one turn; assistant becomes model; empty text
    // and cache_control are dropped.
    let messages = json!([
        {"role": "developer", "content": [{"type": "text", "text": "Rule one.", "cache_control": {"type": "ephemeral"}}]},
        {"role": "user", "content": "a"},
        {"role": "user", "content": [{"type": "text", "text": ""}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": "c"},
        {"role": "system", "content": "Rule two."},
        {"role": "assistant", "content": [{"type": "text", "text": "d"}]},
        {"role": "user", "content": "e", "name": "bob"}
    ]);
    assert_eq!(
        body(chat(messages, json!({})), source()),
        json!({
            "contents": [
                {"role": "user", "parts": [{"text": "a"}, {"text": "b"}]},
                {"role": "model", "parts": [{"text": "c"}, {"text": "d"}]},
                {"role": "user", "parts": [{"text": "e"}]}
            ],
            "systemInstruction": {"parts": [{"text": "Rule one."}, {"text": "Rule two."}]}
        })
    );
}

#[test]
fn images_become_inline_data_or_file_data() {
    let messages = json!([{"role": "user", "content": [
        {"type": "text", "text": "What is in these?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "high"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.JPG?size=large"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/picture"}}
    ]}]);
    assert_eq!(
        body(chat(messages, json!({})), source())["contents"],
        json!([{"role": "user", "parts": [
            {"text": "What is in these?"},
            {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
            {"fileData": {"fileUri": "https://example.com/cat.JPG?size=large", "mimeType": "image/jpeg"}},
            {"fileData": {"fileUri": "https://example.com/picture"}}
        ]}])
    );
    for url in [
        "data:image/png,iVBORw0KGgo=",
        "data:;base64,iVBORw0KGgo=",
        "data:image/png;base64,",
        "data:image/png;base64",
    ] {
        let messages = json!([user("first"), {"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url}}
        ]}]);
        assert_eq!(
            build_error(chat(messages, json!({})), source()),
            BuildError::InvalidRequest(
                "messages[1].content[0]: malformed data URL (expected data:<media type>;base64,<data>)"
                    .into()
            ),
            "{url}"
        );
    }
    let messages = json!([{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "ftp://example.com/a.png"}}
    ]}]);
    assert!(matches!(
        build_error(chat(messages, json!({})), source()),
        BuildError::InvalidRequest(m) if m.starts_with("messages[0].content[0]: ")
    ));
    let messages = json!([{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}
    ]}]);
    assert!(matches!(
        build_error(chat(messages, json!({})), source()),
        BuildError::Unsupported(_)
    ));
}

#[test]
fn tools_and_tool_choice() {
    // The overlay as raw text, so the schema's property order (zeta before alpha) survives.
    let overlay = r#"{"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather for a city","strict":true,"parameters":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":["integer","null"]}},"required":["zeta"],"additionalProperties":false}}},{"type":"function","function":{"name":"ping"}}],"tool_choice":"auto","parallel_tool_calls":false}"#;
    let req = ChatRequest {
        messages_json: json!([user("hi")]).to_string(),
        overlay_json: overlay.into(),
        stream: false,
        prefill: None,
    };
    assert_eq!(
        body_text(req.clone(), source()),
        concat!(
            r#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"#,
            r#""toolConfig":{"functionCallingConfig":{"mode":"AUTO"}},"#,
            r#""tools":[{"functionDeclarations":[{"name":"get_weather","description":"Weather for a city","parametersJsonSchema":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":["integer","null"]}},"required":["zeta"],"additionalProperties":false}},{"name":"ping"}]}]}"#
        )
    );
    let choice = |tool_choice: serde_json::Value| {
        body(
            chat(json!([user("hi")]), json!({"tool_choice": tool_choice})),
            source(),
        )["toolConfig"]
            .clone()
    };
    assert_eq!(
        choice(json!("none")),
        json!({"functionCallingConfig": {"mode": "NONE"}})
    );
    assert_eq!(
        choice(json!("required")),
        json!({"functionCallingConfig": {"mode": "ANY"}})
    );
    assert_eq!(
        choice(json!({"type": "function", "function": {"name": "get_weather"}})),
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}})
    );
    assert_eq!(
        build_error(
            chat(json!([user("hi")]), json!({"tool_choice": "sometimes"})),
            source()
        ),
        BuildError::InvalidRequest(
            "overlay-json: tool_choice: expected auto, none, required or {\"type\": \"function\", \"function\": {\"name\"}}".into()
        )
    );
    assert!(matches!(
        build_error(
            chat(json!([user("hi")]), json!({"tools": [{"type": "web_search"}]})),
            source()
        ),
        BuildError::Unsupported(m) if m.starts_with("overlay-json: tools[0]: ")
    ));
    assert!(matches!(
        build_error(
            chat(json!([user("hi")]), json!({"tools": [{"type": "function", "function": {"description": "no name"}}]})),
            source()
        ),
        BuildError::InvalidRequest(m) if m.starts_with("overlay-json: tools[0]")
    ));
}

#[test]
fn tool_results_find_their_function_name() {
    let messages = json!([
        user("Weather and time in Paris?"),
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
            {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": ""}}
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp_c\": 21.5}"},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "12:00"}]},
        user("thanks")
    ]);
    assert_eq!(
        body_text(chat(messages, json!({})), source()),
        concat!(
            r#"{"contents":[{"role":"user","parts":[{"text":"Weather and time in Paris?"}]},"#,
            r#"{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"},"id":"call_1"}},{"functionCall":{"name":"get_time","args":{},"id":"call_2"}}]},"#,
            r#"{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"temp_c": 21.5},"id":"call_1"}},{"functionResponse":{"name":"get_time","response":{"result":"12:00"},"id":"call_2"}},{"text":"thanks"}]}]}"#
        )
    );
    // The nearest earlier assistant message wins when an id is reused; a JSON content that
    // is not an object is wrapped as text.
    let messages = json!([
        user("go"),
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "old", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "[1, 2]"},
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "new", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c", "content": "42"}
    ]);
    let contents = &body(chat(messages, json!({})), source())["contents"];
    assert_eq!(
        contents[2]["parts"][0]["functionResponse"],
        json!({"name": "old", "response": {"result": "[1, 2]"}, "id": "c"})
    );
    assert_eq!(
        contents[4]["parts"][0]["functionResponse"],
        json!({"name": "new", "response": {"result": "42"}, "id": "c"})
    );
    let messages = json!([
        user("go"),
        {"role": "tool", "tool_call_id": "call_zz", "content": "x"}
    ]);
    assert_eq!(
        build_error(chat(messages, json!({})), source()),
        BuildError::InvalidRequest(
            "messages[1]: tool_call_id `call_zz` matches no tool call of an earlier assistant message".into()
        )
    );
    let messages = json!([
        user("go"),
        {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]}
    ]);
    assert_eq!(
        build_error(chat(messages, json!({})), source()),
        BuildError::InvalidRequest(
            "messages[1].tool_calls[0].function.arguments: expected the text of a JSON object"
                .into()
        )
    );
}

#[test]
fn thought_signatures_are_handed_back_byte_exact() {
    let messages = json!([
        user("Check f and g."),
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "f", "arguments": "{\"x\":1}"}},
            {"id": "call_b", "type": "function", "function": {"name": "g", "arguments": "{}"}}
        ], "reasoning_details": [
            {"type": "reasoning.text", "text": "I should call f.", "signature": "c2lnLXRleHQ+Lz0=", "format": "google-gemini-v1", "index": 0},
            {"type": "reasoning.text", "text": "Claude's thought", "signature": "EqQBCkYIBRgCKkAclaude", "format": "anthropic-claude-v1", "index": 1},
            {"type": "reasoning.text", "text": "unsigned summary", "format": "google-gemini-v1", "index": 2},
            {"type": "reasoning.encrypted", "data": "Q0FMTC1B+/==", "id": "call_a", "format": "google-gemini-v1", "index": 3},
            {"type": "reasoning.encrypted", "data": "TVNHLVNJRw==", "format": "google-gemini-v1", "index": 4},
            {"type": "reasoning.encrypted", "data": "redacted-by-claude", "format": "anthropic-claude-v1", "index": 5},
            {"type": "reasoning.encrypted", "data": "Tk8tU1VDSC1DQUxM", "id": "call_missing", "format": "google-gemini-v1", "index": 6}
        ]},
        {"role": "tool", "tool_call_id": "call_a", "content": "{}"},
        {"role": "tool", "tool_call_id": "call_b", "content": "{}"}
    ]);
    let text = body_text(chat(messages, json!({})), source());
    assert_eq!(
        text,
        concat!(
            r#"{"contents":[{"role":"user","parts":[{"text":"Check f and g."}]},"#,
            r#"{"role":"model","parts":[{"text":"I should call f.","thought":true,"thoughtSignature":"c2lnLXRleHQ+Lz0="},"#,
            r#"{"text":"Checking.","thoughtSignature":"TVNHLVNJRw=="},"#,
            r#"{"functionCall":{"name":"f","args":{"x":1},"id":"call_a"},"thoughtSignature":"Q0FMTC1B+/=="},"#,
            r#"{"functionCall":{"name":"g","args":{},"id":"call_b"}}]},"#,
            r#"{"role":"user","parts":[{"functionResponse":{"name":"f","response":{},"id":"call_a"}},{"functionResponse":{"name":"g","response":{},"id":"call_b"}}]}]}"#
        )
    );
    for foreign in [
        "EqQBCkYIBRgCKkAclaude",
        "Claude's thought",
        "redacted-by-claude",
        "unsigned summary",
        "Tk8tU1VDSC1DQUxM",
    ] {
        assert!(!text.contains(foreign), "{foreign} leaked into {text}");
    }
    // A message-level signature on a turn with no other part rides an empty text part; one
    // on a turn whose first part is a signed call goes to the next unsigned part.
    let messages = json!([
        user("a"),
        {"role": "assistant", "content": "", "reasoning_details": [
            {"type": "reasoning.encrypted", "data": "T05MWQ==", "format": "google-gemini-v1", "index": 0}
        ]},
        user("b"),
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "k1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "k2", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ], "reasoning_details": [
            {"type": "reasoning.encrypted", "data": "V0hPTEU=", "format": "google-gemini-v1", "index": 0},
            {"type": "reasoning.encrypted", "data": "SzE=", "id": "k1", "format": "google-gemini-v1", "index": 1}
        ]}
    ]);
    let contents = &body(chat(messages, json!({})), source())["contents"];
    assert_eq!(
        contents[1],
        json!({"role": "model", "parts": [{"text": "", "thoughtSignature": "T05MWQ=="}]})
    );
    assert_eq!(
        contents[3]["parts"],
        json!([
            {"functionCall": {"name": "f", "args": {}, "id": "k1"}, "thoughtSignature": "SzE="},
            {"functionCall": {"name": "f", "args": {}, "id": "k2"}, "thoughtSignature": "V0hPTEU="}
        ])
    );
}

#[test]
fn thinking_config_follows_enable_thinking() {
    let generation = |enable: Option<bool>, budget: Option<u32>| {
        let mut s = source();
        s.enable_thinking = enable;
        s.thinking_budget_tokens = budget;
        body(chat(json!([user("hi")]), json!({})), s)
            .get("generationConfig")
            .cloned()
    };
    assert_eq!(
        generation(Some(true), None),
        Some(json!({"thinkingConfig": {"includeThoughts": true, "thinkingBudget": -1}}))
    );
    assert_eq!(
        generation(Some(true), Some(2048)),
        Some(json!({"thinkingConfig": {"includeThoughts": true, "thinkingBudget": 2048}}))
    );
    assert_eq!(
        generation(Some(false), Some(2048)),
        Some(json!({"thinkingConfig": {"thinkingBudget": 0}}))
    );
    assert_eq!(generation(None, Some(2048)), None);
    // EXTRA_BODY's thinkingConfig replaces the provider's default.
    let mut s = source();
    s.enable_thinking = Some(true);
    s.extra_body_json =
        r#"{"generation_config":{"thinking_config":{"thinkingLevel":"low"}}}"#.into();
    assert_eq!(
        body(chat(json!([user("hi")]), json!({})), s)["generationConfig"],
        json!({"thinkingConfig": {"thinkingLevel": "low"}})
    );
}

#[test]
fn json_schema_and_sampling_parameters() {
    let overlay = r#"{"response_format":{"type":"json_schema","json_schema":{"name":"answer","strict":true,"schema":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}},"required":["zeta","alpha"],"additionalProperties":false}}},"temperature":0,"top_p":0.95,"top_k":40,"max_tokens":256,"stop":["\n\n","END"],"seed":42,"presence_penalty":0.5,"frequency_penalty":-0.25,"n":1,"user":"u-1","logprobs":true}"#;
    let req = ChatRequest {
        messages_json: json!([user("hi")]).to_string(),
        overlay_json: overlay.into(),
        stream: false,
        prefill: None,
    };
    assert_eq!(
        body_text(req, source()),
        concat!(
            r#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"#,
            r#""candidateCount":1,"frequencyPenalty":-0.25,"maxOutputTokens":256,"presencePenalty":0.5,"#,
            r#""responseJsonSchema":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer"}},"required":["zeta","alpha"],"additionalProperties":false},"#,
            r#""responseMimeType":"application/json","seed":42,"stopSequences":["\n\n","END"],"temperature":0,"topK":40,"topP":0.95}}"#
        )
    );
    let generation = |overlay: serde_json::Value| {
        body(chat(json!([user("hi")]), overlay), source())
            .get("generationConfig")
            .cloned()
    };
    assert_eq!(
        generation(json!({"response_format": {"type": "json_object"}, "stop": "STOP"})),
        Some(json!({"responseMimeType": "application/json", "stopSequences": ["STOP"]}))
    );
    assert_eq!(
        generation(json!({"response_format": {"type": "text"}, "temperature": null})),
        None
    );
    assert_eq!(
        generation(json!({"max_completion_tokens": 32, "max_tokens": 64})),
        Some(json!({"maxOutputTokens": 32}))
    );
    for (overlay, message) in [
        (
            json!({"n": 2}),
            "overlay-json: n: Gemini answers one choice per call here; n must be 1",
        ),
        (
            json!({"temperature": "hot"}),
            "overlay-json: temperature: expected a number",
        ),
        (
            json!({"max_tokens": -5}),
            "overlay-json: max_tokens: expected a non-negative integer",
        ),
        (
            json!({"stop": [1]}),
            "overlay-json: stop: expected a string or an array of strings",
        ),
    ] {
        assert_eq!(
            build_error(chat(json!([user("hi")]), overlay), source()),
            BuildError::InvalidRequest(message.into())
        );
    }
}

#[test]
fn max_tokens_default_only_when_nobody_set_a_cap() {
    let mut s = source();
    s.max_tokens = Some(512);
    let generation = |overlay: serde_json::Value, extra: &str| {
        let mut s = s.clone();
        s.extra_body_json = extra.into();
        body(chat(json!([user("hi")]), overlay), s)["generationConfig"].clone()
    };
    assert_eq!(generation(json!({}), "{}"), json!({"maxOutputTokens": 512}));
    assert_eq!(
        generation(json!({"max_tokens": 64}), "{}"),
        json!({"maxOutputTokens": 64})
    );
    assert_eq!(
        generation(json!({}), r#"{"generationConfig":{"maxOutputTokens":100}}"#),
        json!({"maxOutputTokens": 100})
    );
    assert_eq!(
        generation(
            json!({"max_completion_tokens": 7}),
            r#"{"generationConfig":{"max_output_tokens":100}}"#
        ),
        json!({"maxOutputTokens": 7})
    );
}

#[test]
fn extra_body_merges_under_the_client_and_never_over_protected_keys() {
    let mut s = source();
    s.extra_body_json = json!({
        "safety_settings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        "generationConfig": {"topK": 5, "temperature": 0.9},
        "cachedContent": "cachedContents/abc",
        "contents": [{"role": "user", "parts": [{"text": "evil"}]}],
        "system_instruction": {"parts": [{"text": "evil"}]},
        "model": "models/evil-model"
    })
    .to_string();
    let req = chat(
        json!([{"role": "system", "content": "sys"}, user("hi")]),
        json!({"temperature": 0.2, "model": "evil", "contents": [], "stream": true}),
    );
    let http = <Gemini as Guest>::build_request(req.clone(), s.clone()).unwrap();
    assert_eq!(http.path, "/v1beta/models/gemini-2.5-flash:generateContent");
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&http.body).unwrap(),
        json!({
            "cachedContent": "cachedContents/abc",
            "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
            "generationConfig": {"temperature": 0.2, "topK": 5},
            "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
            "systemInstruction": {"parts": [{"text": "sys"}]}
        })
    );
    // The client's tools win over EXTRA_BODY's.
    s.extra_body_json = r#"{"tools":[{"googleSearch":{}}]}"#.into();
    assert_eq!(
        body(chat(json!([user("hi")]), json!({})), s.clone())["tools"],
        json!([{"googleSearch": {}}])
    );
    let with_tools = chat(
        json!([user("hi")]),
        json!({"tools": [{"type": "function", "function": {"name": "f"}}]}),
    );
    assert_eq!(
        body(with_tools, s.clone())["tools"],
        json!([{"functionDeclarations": [{"name": "f"}]}])
    );
    s.extra_body_json = "{not json".into();
    assert!(matches!(
        build_error(chat(json!([user("hi")]), json!({})), s.clone()),
        BuildError::Unsupported(m) if m.starts_with("extra-body-json: invalid JSON")
    ));
    s.extra_body_json = r#"{"generationConfig": 3}"#.into();
    assert!(matches!(
        build_error(chat(json!([user("hi")]), json!({})), s),
        BuildError::Unsupported(m) if m.starts_with("extra-body-json: generationConfig")
    ));
}

#[test]
fn malformed_inputs_are_refused_with_the_field_named() {
    let mut req = chat(json!([user("hi")]), json!({}));
    req.messages_json = "[{\"role\": \"user\"".into();
    assert!(matches!(
        build_error(req.clone(), source()),
        BuildError::InvalidRequest(m) if m.starts_with("messages-json: invalid JSON")
    ));
    req.messages_json = "{}".into();
    assert_eq!(
        build_error(req.clone(), source()),
        BuildError::InvalidRequest("messages-json: expected a JSON array of messages".into())
    );
    req.messages_json = json!([user("hi")]).to_string();
    req.overlay_json = "[1, 2, 3]".into();
    assert_eq!(
        build_error(req.clone(), source()),
        BuildError::InvalidRequest("overlay-json: expected a JSON object".into())
    );
    req.overlay_json = "  ".into();
    assert!(<Gemini as Guest>::build_request(req.clone(), source()).is_ok());
    req.messages_json = json!([{"role": "narrator", "content": "x"}]).to_string();
    assert_eq!(
        build_error(req.clone(), source()),
        BuildError::InvalidRequest("messages[0]: role `narrator` is not supported".into())
    );
    req.messages_json = json!(["hi"]).to_string();
    assert_eq!(
        build_error(req.clone(), source()),
        BuildError::InvalidRequest("messages[0]: expected an object with a string `role`".into())
    );
    req.messages_json = json!([user("hi")]).to_string();
    req.prefill = Some("Once upon".into());
    assert!(matches!(
        build_error(req, source()),
        BuildError::Unsupported(_)
    ));
}
