//! `build-request`: the HTTP envelope and byte-exact bodies.

use polygateway_plugin_sdk::{AuthScheme, BuildError, ChatRequest, Guest, ThinkingStyle};
use serde_json::json;

use super::{Anthropic, body, body_json, build, chat, source, thinking_source};

const HELLO: &str =
    r#"[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello."}]"#;

#[test]
fn describes_itself() {
    let info = <Anthropic as Guest>::describe();
    assert_eq!(
        (info.name.as_str(), info.contract_version.as_str()),
        ("anthropic", "0.2.0")
    );
    let c = info.capabilities;
    assert!(c.chat && c.streaming && c.prefill_continuation);
    assert!(!c.native_json_schema && !c.embedding && !c.ocr && !c.audio);
    assert_eq!(c.thinking, ThinkingStyle::ReasoningBlocks);
}

#[test]
fn a_typical_request() {
    let mut req = chat(HELLO, r#"{"temperature":0.2}"#);
    req.stream = true;
    let http = build(req, source()).unwrap();
    assert_eq!(
        (http.method.as_str(), http.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(http.auth, AuthScheme::Header("x-api-key".into()));
    let headers: Vec<(&str, &str)> = http
        .headers
        .iter()
        .map(|h| (h.name.as_str(), h.value.as_str()))
        .collect();
    assert_eq!(
        headers,
        [
            ("anthropic-version", "2023-06-01"),
            ("content-type", "application/json")
        ]
    );
    assert_eq!(
        String::from_utf8(http.body).unwrap(),
        r#"{"max_tokens":4096,"messages":[{"role":"user","content":"Say hello."}],"model":"claude-sonnet-4-5","stream":true,"system":[{"type":"text","text":"You are terse."}],"temperature":0.2}"#
    );
}

#[test]
fn system_and_developer_messages_are_lifted_in_order() {
    let messages = r#"[
        {"role":"system","content":"One."},
        {"role":"developer","content":[{"type":"text","text":"Two.","cache_control":{"type":"ephemeral"}},{"type":"text","text":""}]},
        {"role":"user","content":"Hi"},
        {"role":"system","content":"Three."},
        {"role":"user","content":[{"type":"text","text":"again"}]}
    ]"#;
    assert_eq!(
        body(chat(messages, "{}"), source()),
        concat!(
            r#"{"max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"Hi"},{"type":"text","text":"again"}]}],"#,
            r#""model":"claude-sonnet-4-5","stream":false,"#,
            r#""system":[{"type":"text","text":"One."},{"type":"text","text":"Two.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"Three."}]}"#
        )
    );
}

#[test]
fn consecutive_turns_of_one_role_merge() {
    let messages = r#"[{"role":"user","content":"a"},{"role":"user","content":"b"},
        {"role":"assistant","content":"c"},{"role":"assistant","content":[{"type":"text","text":"d"}]}]"#;
    let v = body_json(chat(messages, "{}"), source());
    assert_eq!(
        v["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "c"}, {"type": "text", "text": "d"}]}
        ])
    );
    assert!(v.get("system").is_none());
}

#[test]
fn images_become_image_blocks() {
    let messages = r#"[{"role":"user","content":[
        {"type":"text","text":"What is this?"},
        {"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/4AAQSkZJRg==","detail":"low"},"cache_control":{"type":"ephemeral","ttl":"5m"}},
        {"type":"image_url","image_url":"https://upload.wikimedia.org/ant.jpg"}]}]"#;
    assert_eq!(
        body(chat(messages, "{}"), source()),
        concat!(
            r#"{"max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},"#,
            r#"{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/4AAQSkZJRg=="},"cache_control":{"type":"ephemeral","ttl":"5m"}},"#,
            r#"{"type":"image","source":{"type":"url","url":"https://upload.wikimedia.org/ant.jpg"}}]}],"#,
            r#""model":"claude-sonnet-4-5","stream":false}"#
        )
    );
}

#[test]
fn a_malformed_data_url_names_the_message() {
    for url in [
        "data:image/png,abc",
        "data:;base64,abc",
        "data:image/png;base64,",
        "ftp://x/y.png",
    ] {
        let messages = format!(
            r#"[{{"role":"user","content":"hi"}},{{"role":"user","content":[{{"type":"text","text":"x"}},{{"type":"image_url","image_url":{{"url":"{url}"}}}}]}}]"#
        );
        let err = build(chat(&messages, "{}"), source()).unwrap_err();
        let BuildError::InvalidRequest(m) = err else {
            panic!("{url}: {err:?}")
        };
        assert!(
            m.starts_with("messages-json: messages[1].content[1]: "),
            "{m}"
        );
    }
}

#[test]
fn tools_and_tool_choices() {
    let overlay = r#"{"tools":[
        {"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"number"}},"required":["zeta"]}},"cache_control":{"type":"ephemeral"}},
        {"type":"function","function":{"name":"now"}}],
        "tool_choice":{"type":"function","function":{"name":"get_weather"}},"parallel_tool_calls":false}"#;
    let text = body(chat(HELLO, overlay), source());
    assert!(
        text.contains(concat!(
            r#""tool_choice":{"type":"tool","name":"get_weather","disable_parallel_tool_use":true},"#,
            r#""tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"number"}},"required":["zeta"]},"cache_control":{"type":"ephemeral"}},"#,
            r#"{"name":"now","input_schema":{"type":"object","properties":{}}}]"#
        )),
        "{text}"
    );
    let choice = |overlay: &str| body_json(chat(HELLO, overlay), source())["tool_choice"].clone();
    let tools = r#""tools":[{"type":"function","function":{"name":"f"}}]"#;
    assert_eq!(
        choice(&format!(r#"{{{tools},"tool_choice":"auto"}}"#)),
        json!({"type": "auto"})
    );
    assert_eq!(
        choice(&format!(
            r#"{{{tools},"tool_choice":"none","parallel_tool_calls":false}}"#
        )),
        json!({"type": "none"})
    );
    assert_eq!(
        choice(&format!(r#"{{{tools},"tool_choice":"required"}}"#)),
        json!({"type": "any"})
    );
    assert_eq!(
        choice(&format!(r#"{{{tools},"parallel_tool_calls":false}}"#)),
        json!({"type": "auto", "disable_parallel_tool_use": true})
    );
    assert_eq!(
        choice(&format!(r#"{{{tools},"parallel_tool_calls":true}}"#)),
        json!(null)
    );
    assert_eq!(choice(r#"{"parallel_tool_calls":false}"#), json!(null));
    assert_eq!(
        choice(r#"{"tool_choice":"required","tools":[]}"#),
        json!(null)
    );
    assert_eq!(
        choice(
            r#"{"tools":[{"type":"web_search_20250305","name":"web_search"}],"tool_choice":{"type":"any","disable_parallel_tool_use":true}}"#
        ),
        json!({"type": "any", "disable_parallel_tool_use": true})
    );
    let native = r#"{"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}]}"#;
    assert_eq!(
        body_json(chat(HELLO, native), source())["tools"],
        json!([{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}])
    );
    for bad in [
        r#"{"tool_choice":"sometimes"}"#,
        r#"{"tool_choice":{"type":"allowed_tools"}}"#,
        r#"{"tool_choice":{"type":"function","function":{}}}"#,
        r#"{"tools":{"name":"f"}}"#,
        r#"{"tools":[{"type":"function","function":{"description":"no name"}}]}"#,
        r#"{"parallel_tool_calls":"no"}"#,
    ] {
        assert!(
            matches!(
                build(chat(HELLO, bad), source()),
                Err(BuildError::InvalidRequest(_))
            ),
            "{bad}"
        );
    }
}

#[test]
fn tool_calls_and_tool_results() {
    let messages = r#"[
        {"role":"user","content":"Weather in Paris and the time?"},
        {"role":"assistant","content":"Checking.","tool_calls":[
            {"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\", \"unit\": \"c\"}"}},
            {"id":"toolu_2","type":"function","function":{"name":"now","arguments":""}}]},
        {"role":"tool","tool_call_id":"toolu_1","content":"21 C"},
        {"role":"tool","tool_call_id":"toolu_2","content":[{"type":"text","text":"14:00","cache_control":{"type":"ephemeral"}}]},
        {"role":"tool","tool_call_id":"toolu_3","content":""}
    ]"#;
    assert_eq!(
        body(chat(messages, "{}"), source()),
        concat!(
            r#"{"max_tokens":4096,"messages":[{"role":"user","content":"Weather in Paris and the time?"},"#,
            r#"{"role":"assistant","content":[{"type":"text","text":"Checking."},"#,
            r#"{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city": "Paris", "unit": "c"}},"#,
            r#"{"type":"tool_use","id":"toolu_2","name":"now","input":{}}]},"#,
            r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"21 C"},"#,
            r#"{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"14:00","cache_control":{"type":"ephemeral"}}]},"#,
            r#"{"type":"tool_result","tool_use_id":"toolu_3"}]}],"#,
            r#""model":"claude-sonnet-4-5","stream":false}"#
        )
    );
}

#[test]
fn bad_tool_calls_name_the_message() {
    let cases = [
        (
            r#"{"id":"t","type":"function","function":{"name":"f","arguments":"{not json"}}"#,
            "messages-json: messages[1].tool_calls[0].function.arguments: expected the text of a JSON object",
        ),
        (
            r#"{"type":"function","function":{"name":"f","arguments":"{}"}}"#,
            "messages-json: messages[1].tool_calls[0]: a tool call needs a string `id`",
        ),
        (
            r#"{"id":"t","type":"function","function":{"arguments":"{}"}}"#,
            "messages-json: messages[1].tool_calls[0]: a tool call needs a string `function.name`",
        ),
    ];
    for (call, want) in cases {
        let messages = format!(
            r#"[{{"role":"user","content":"x"}},{{"role":"assistant","tool_calls":[{call}]}}]"#
        );
        assert_eq!(
            build(chat(&messages, "{}"), source()).unwrap_err(),
            BuildError::InvalidRequest(want.into())
        );
    }
    let tool = r#"[{"role":"tool","content":"x"}]"#;
    assert_eq!(
        build(chat(tool, "{}"), source()).unwrap_err(),
        BuildError::InvalidRequest(
            "messages-json: messages[0]: a tool message needs a string `tool_call_id`".into()
        )
    );
}

/// The gateway's own `reasoning_details` go back byte for byte (escapes included), first in
/// their turn; another vendor's are dropped.
#[test]
fn reasoning_details_are_handed_back_byte_exact() {
    let thinking = r#""Let me think \"hard\":\n\u00e9 \ud83d\ude80 \/ done""#;
    let signature = r#""EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds+/=""#;
    let messages = format!(
        r#"[{{"role":"user","content":"Q"}},
        {{"role":"assistant","content":"A","reasoning_details":[
            {{"type":"reasoning.text","text":"gemini's","signature":"CiQBgemini","format":"google-gemini-v1","index":0}},
            {{"type":"reasoning.text","text":{thinking},"signature":{signature},"format":"anthropic-claude-v1","index":1}},
            {{"type":"reasoning.encrypted","data":"CiQBgeminiCall","id":"call_1","format":"google-gemini-v1","index":2}},
            {{"type":"reasoning.encrypted","data":"EmwKAhgB\u002bEgy3","format":"anthropic-claude-v1","index":3}}],
         "tool_calls":[{{"id":"toolu_9","type":"function","function":{{"name":"f","arguments":"{{}}"}}}}]}},
        {{"role":"tool","tool_call_id":"toolu_9","content":"ok"}}]"#
    );
    let text = body(chat(&messages, "{}"), source());
    let want = format!(
        concat!(
            r#"{{"role":"assistant","content":[{{"type":"thinking","thinking":{},"signature":{}}},"#,
            r#"{{"type":"redacted_thinking","data":"EmwKAhgB\u002bEgy3"}},"#,
            r#"{{"type":"text","text":"A"}},{{"type":"tool_use","id":"toolu_9","name":"f","input":{{}}}}]}}"#
        ),
        thinking, signature
    );
    assert!(text.contains(&want), "{text}");
    assert!(!text.contains("gemini"), "{text}");
}

#[test]
fn output_cap_sources() {
    let cap = |overlay: &str, max_tokens: Option<u32>| {
        let src = polygateway_plugin_sdk::SourceInfo {
            max_tokens,
            ..source()
        };
        body_json(chat(HELLO, overlay), src)["max_tokens"].clone()
    };
    assert_eq!(cap("{}", None), json!(4096));
    assert_eq!(cap("{}", Some(1000)), json!(1000));
    assert_eq!(cap(r#"{"max_tokens":50}"#, Some(1000)), json!(50));
    assert_eq!(
        cap(r#"{"max_completion_tokens":70,"max_tokens":50}"#, None),
        json!(70)
    );
    assert_eq!(cap(r#"{"max_tokens":null}"#, Some(9)), json!(9));
    for bad in [
        r#"{"max_tokens":-1}"#,
        r#"{"max_tokens":1.5}"#,
        r#"{"max_tokens":"9"}"#,
    ] {
        assert_eq!(
            build(chat(HELLO, bad), source()).unwrap_err(),
            BuildError::InvalidRequest(
                "overlay-json: max_tokens: expected a non-negative integer".into()
            )
        );
    }
}

#[test]
fn thinking_budget_and_cap() {
    let thinking = |overlay: &str, src| {
        let v = body_json(chat(HELLO, overlay), src);
        (v["thinking"].clone(), v["max_tokens"].clone())
    };
    assert_eq!(
        body(chat(HELLO, "{}"), thinking_source(None)),
        concat!(
            r#"{"max_tokens":4096,"messages":[{"role":"user","content":"Say hello."}],"model":"claude-sonnet-4-5","#,
            r#""stream":false,"system":[{"type":"text","text":"You are terse."}],"thinking":{"type":"enabled","budget_tokens":1024}}"#
        )
    );
    assert_eq!(
        thinking("{}", thinking_source(Some(16000))),
        (
            json!({"type": "enabled", "budget_tokens": 16000}),
            json!(20096)
        )
    );
    let capped = polygateway_plugin_sdk::SourceInfo {
        max_tokens: Some(2000),
        ..thinking_source(None)
    };
    assert_eq!(thinking("{}", capped).1, json!(2000));
    assert_eq!(
        thinking(r#"{"max_tokens":16001}"#, thinking_source(Some(16000))).1,
        json!(16001)
    );
    assert_eq!(
        build(chat(HELLO, r#"{"max_tokens":1024}"#), thinking_source(None)).unwrap_err(),
        BuildError::InvalidRequest(
            "overlay-json: max_tokens: 1024 must exceed the thinking budget_tokens 1024 \
             (THINKING_BUDGET): anthropic counts thinking in max_tokens"
                .into()
        )
    );
    assert!(matches!(
        build(chat(HELLO, "{}"), thinking_source(Some(500))),
        Err(BuildError::Unsupported(_))
    ));
    let off = polygateway_plugin_sdk::SourceInfo {
        enable_thinking: Some(false),
        thinking_budget_tokens: Some(5000),
        ..source()
    };
    assert_eq!(thinking("{}", off), (json!(null), json!(4096)));
}

#[test]
fn thinking_drops_the_sampling_anthropic_refuses() {
    let overlay = r#"{"temperature":0.7,"top_k":5,"top_p":0.97}"#;
    let v = body_json(chat(HELLO, overlay), thinking_source(None));
    assert_eq!((v.get("temperature"), v.get("top_k")), (None, None));
    assert_eq!(v["top_p"], json!(0.97));
    let v = body_json(chat(HELLO, r#"{"top_p":0.9}"#), thinking_source(None));
    assert_eq!(v.get("top_p"), None);
    let v = body_json(chat(HELLO, overlay), source());
    assert_eq!(
        (v["temperature"].clone(), v["top_k"].clone()),
        (json!(0.7), json!(5))
    );
    assert!(matches!(
        build(chat(HELLO, r#"{"temperature":"hot"}"#), source()),
        Err(BuildError::InvalidRequest(_))
    ));
}

#[test]
fn forced_tools_and_prefill_are_unsupported_while_thinking() {
    let forced =
        r#"{"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}"#;
    assert!(matches!(
        build(chat(HELLO, forced), thinking_source(None)),
        Err(BuildError::Unsupported(_))
    ));
    let mut req = chat(HELLO, "{}");
    req.prefill = Some("Once".into());
    assert!(matches!(
        build(req, thinking_source(None)),
        Err(BuildError::Unsupported(_))
    ));
}

#[test]
fn prefill_ends_the_conversation() {
    let prefilled = |messages: &str, prefill: &str| {
        let req = ChatRequest {
            prefill: Some(prefill.into()),
            ..chat(messages, "{}")
        };
        body_json(req, source())["messages"].clone()
    };
    assert_eq!(
        prefilled(HELLO, "Once upon a time, "),
        json!([{"role": "user", "content": "Say hello."},
               {"role": "assistant", "content": "Once upon a time,"}])
    );
    assert_eq!(
        prefilled(
            r#"[{"role":"user","content":"Q"},{"role":"assistant","content":"Draft:"}]"#,
            "Hel"
        ),
        json!([{"role": "user", "content": "Q"},
               {"role": "assistant", "content": [{"type": "text", "text": "Draft:"}, {"type": "text", "text": "Hel"}]}])
    );
    assert_eq!(
        prefilled(HELLO, " \n"),
        json!([{"role": "user", "content": "Say hello."}])
    );
}

#[test]
fn other_openai_parameters() {
    let overlay = r#"{"stop":"END","user":"u-1","n":1,"seed":3,"frequency_penalty":1,
        "presence_penalty":1,"logprobs":true,"top_logprobs":1,"response_format":{"type":"json_object"},
        "logit_bias":{},"stream_options":{"include_usage":true},"store":true,"reasoning_effort":"high",
        "service_tier":"flex","metadata":{"k":"v"},"model":"x","messages":[],"stream":true}"#;
    assert_eq!(
        body(chat(HELLO, overlay), source()),
        concat!(
            r#"{"max_tokens":4096,"messages":[{"role":"user","content":"Say hello."}],"metadata":{"user_id":"u-1"},"#,
            r#""model":"claude-sonnet-4-5","stop_sequences":["END"],"stream":false,"#,
            r#""system":[{"type":"text","text":"You are terse."}]}"#
        )
    );
    let stops = |stop: &str| {
        body_json(chat(HELLO, &format!(r#"{{"stop":{stop}}}"#)), source())
            .get("stop_sequences")
            .cloned()
    };
    assert_eq!(stops(r#"["a","b"]"#), Some(json!(["a", "b"])));
    assert_eq!(stops(r#"[]"#), None);
    assert_eq!(stops(r#""""#), None);
    assert_eq!(stops("null"), None);
    for bad in [
        r#"{"stop":[1]}"#,
        r#"{"stop":3}"#,
        r#"{"user":7}"#,
        r#"{"n":2}"#,
        r#"{"n":"1"}"#,
    ] {
        assert!(
            matches!(
                build(chat(HELLO, bad), source()),
                Err(BuildError::InvalidRequest(_))
            ),
            "{bad}"
        );
    }
    assert_eq!(
        build(chat(HELLO, r#"{"n":3}"#), source()).unwrap_err(),
        BuildError::InvalidRequest("overlay-json: n: anthropic answers one choice, not 3".into())
    );
}

#[test]
fn extra_body_merge_order() {
    let src = |extra: &str| polygateway_plugin_sdk::SourceInfo {
        extra_body_json: extra.into(),
        ..source()
    };
    let v = body_json(
        chat(HELLO, r#"{"temperature":0.1,"max_tokens":10}"#),
        src(
            r#"{"temperature":0.9,"max_tokens":99,"top_k":4,"model":"evil","system":"evil",
                "messages":[],"stream":true,"stream_options":{},"thinking":{"type":"adaptive"}}"#,
        ),
    );
    assert_eq!(
        v,
        json!({"max_tokens": 10, "messages": [{"role": "user", "content": "Say hello."}],
               "model": "claude-sonnet-4-5", "stream": false, "system": [{"type": "text", "text": "You are terse."}],
               "temperature": 0.1, "thinking": {"type": "adaptive"}, "top_k": 4})
    );
    let v = body_json(chat(HELLO, "{}"), src(r#"{"max_tokens":99}"#));
    assert_eq!(v["max_tokens"], json!(99));
    assert!(matches!(
        build(chat(HELLO, "{}"), src("[1]")),
        Err(BuildError::Unsupported(_))
    ));
    assert_eq!(
        body_json(chat(HELLO, "{}"), src("  ")),
        body_json(chat(HELLO, "{}"), source())
    );
}

#[test]
fn malformed_input_is_named() {
    let cases = [
        (
            "{}",
            "{}",
            "messages-json: expected a JSON array of messages",
        ),
        (
            "[7]",
            "{}",
            "messages-json: messages[0]: expected a message object",
        ),
        (
            r#"[{"content":"x"}]"#,
            "{}",
            "messages-json: messages[0]: a message needs a string `role`",
        ),
        (
            r#"[{"role":"narrator","content":"x"}]"#,
            "{}",
            "messages-json: messages[0]: unknown role `narrator`",
        ),
        (
            r#"[{"role":"user","content":7}]"#,
            "{}",
            "messages-json: messages[0].content: expected a string or an array of content parts",
        ),
        (
            r#"[{"role":"user","content":[{"type":"text"}]}]"#,
            "{}",
            "messages-json: messages[0].content[0]: a text part needs a string `text`",
        ),
        (HELLO, "[1]", "overlay-json: expected a JSON object"),
    ];
    for (messages, overlay, want) in cases {
        assert_eq!(
            build(chat(messages, overlay), source()).unwrap_err(),
            BuildError::InvalidRequest(want.into()),
            "{messages} {overlay}"
        );
    }
    let err = build(chat(HELLO, "{"), source()).unwrap_err();
    assert!(
        matches!(&err, BuildError::InvalidRequest(m) if m.starts_with("overlay-json: invalid JSON")),
        "{err:?}"
    );
    let audio = r#"[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]}]"#;
    assert_eq!(
        build(chat(audio, "{}"), source()).unwrap_err(),
        BuildError::Unsupported(
            "messages-json: messages[0].content[0]: anthropic cannot take a content part of type `input_audio` here".into()
        )
    );
    let system_image = r#"[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]"#;
    assert!(matches!(
        build(chat(system_image, "{}"), source()),
        Err(BuildError::Unsupported(_))
    ));
}

#[test]
fn the_clients_thinking_overrides_the_sources() {
    let with = |overlay: &str, src| {
        let v = body_json(chat(HELLO, overlay), src);
        (
            v["thinking"].clone(),
            v["max_tokens"].clone(),
            v["temperature"].clone(),
        )
    };
    // Enabled with the client's budget on a source without thinking (and its sampling rules).
    assert_eq!(
        with(
            r#"{"thinking":{"type":"enabled","budget_tokens":2048},"max_tokens":4000,"temperature":0.2}"#,
            source()
        ),
        (
            json!({"type": "enabled", "budget_tokens": 2048}),
            json!(4000),
            json!(null)
        )
    );
    // Disabled on a thinking source: no thinking, the temperature kept.
    assert_eq!(
        with(
            r#"{"thinking":{"type":"disabled"},"temperature":0.2}"#,
            thinking_source(Some(5000))
        ),
        (json!(null), json!(4096), json!(0.2))
    );
    // DeepSeek's spelling, without a budget: the source's.
    assert_eq!(
        with(
            r#"{"thinking":{"type":"enabled"}}"#,
            thinking_source(Some(3000))
        )
        .0,
        json!({"type": "enabled", "budget_tokens": 3000})
    );
    // Adaptive as given.
    assert_eq!(
        with(r#"{"thinking":{"type":"adaptive"}}"#, source()).0,
        json!({"type": "adaptive"})
    );
    assert_eq!(
        build(
            chat(
                HELLO,
                r#"{"thinking":{"type":"enabled","budget_tokens":100}}"#
            ),
            source()
        )
        .unwrap_err(),
        BuildError::InvalidRequest(
            "overlay-json: thinking.budget_tokens: 100 is below anthropic's minimum of 1024".into()
        )
    );
    assert!(matches!(
        build(chat(HELLO, r#"{"thinking":"on"}"#), source()),
        Err(BuildError::InvalidRequest(m)) if m.starts_with("overlay-json: thinking: expected")
    ));
}

#[test]
fn a_tool_results_error_flag_reaches_the_block() {
    let messages = r#"[{"role":"user","content":"go"},
        {"role":"assistant","content":null,"tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"f","arguments":"{}"}}]},
        {"role":"tool","tool_call_id":"toolu_1","content":"boom","is_error":true}]"#;
    let v = body_json(chat(messages, "{}"), source());
    assert_eq!(
        v["messages"][2]["content"][0],
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": "boom", "is_error": true})
    );
}
