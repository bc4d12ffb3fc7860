//! The `.env` file and settings parser: `polygateway::config::parse_dotenv` reads the bytes
//! as a `.env` file (as `polygateway serve` and a reload do), then
//! `polygateway::config::settings_from_vars` turns the variables into settings and validates
//! them. Properties: it never panics; a refusal says something; no error message repeats
//! the value of an `…API_KEY` variable, nor the text of a line that does not parse.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|file: &[u8]| {
    let vars = match polygateway::config::parse_dotenv(Path::new(".env"), file) {
        Ok(vars) => vars,
        Err(e) => {
            let message = e.to_string();
            for line in String::from_utf8_lossy(file).lines() {
                let line = line.trim();
                // The message's own words hold no `=`; a line quoted back would.
                if line.len() >= 12 && line.contains('=') {
                    assert!(
                        !message.contains(line),
                        "the error quotes a line: {message}"
                    );
                }
            }
            return;
        }
    };
    // A key's value may be quoted back only where it is also part of another variable's
    // value (an error may show the bad value of a key that is not a secret).
    let secrets: Vec<String> = vars
        .iter()
        .filter(|(k, v)| k.ends_with("API_KEY") && v.len() >= 8)
        .map(|(_, v)| v.clone())
        .filter(|v| {
            !vars
                .iter()
                .any(|(k, other)| !k.ends_with("API_KEY") && other.contains(v.as_str()))
        })
        .collect();
    if let Err(e) = polygateway::config::settings_from_vars(vars) {
        let message = e.to_string();
        assert!(!message.is_empty(), "a refusal without a message");
        for s in &secrets {
            assert!(
                !message.contains(s.as_str()),
                "an error repeats a key: {message}"
            );
        }
    }
});
