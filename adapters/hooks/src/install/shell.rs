//! The hook's command line as the agents run it (through `sh -c`): the binary's absolute path,
//! quoted when it needs to be, then `hook AGENT`; and the way back, to tell our entry from the
//! user's other hooks.

use crate::Agent;
use std::path::{Path, PathBuf};

/// The command an agent runs before each tool call: `BINARY hook AGENT`.
pub(crate) fn hook_command(binary: &Path, agent: Agent) -> String {
    format!(
        "{} hook {}",
        quote(&binary.to_string_lossy()),
        agent.as_str()
    )
}

/// A word the shell reads back as `word`: as it is when it holds nothing the shell treats
/// specially, else in single quotes (a quote inside written `'\''`).
pub(crate) fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The binary a command names when it is agentwatch's hook for `agent`: one shell word whose
/// file name starts with `agentwatch`, then ` hook AGENT`. Anything else is not ours.
pub(crate) fn our_binary(command: &str, agent: Agent) -> Option<PathBuf> {
    let program = command
        .trim()
        .strip_suffix(agent.as_str())?
        .strip_suffix(" hook ")?;
    let path = PathBuf::from(one_word(program.trim_end())?);
    let name = path.file_name()?.to_str()?;
    name.starts_with("agentwatch").then_some(path)
}

/// What the shell reads `text` as when it is exactly one word (quotes and backslashes
/// undone); `None` for several words or an unclosed quote.
fn one_word(text: &str) -> Option<String> {
    let mut word = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => loop {
                match chars.next()? {
                    '\'' => break,
                    c => word.push(c),
                }
            },
            '"' => loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => match chars.next()? {
                        c @ ('"' | '\\' | '$' | '`') => word.push(c),
                        '\n' => {}
                        c => {
                            word.push('\\');
                            word.push(c);
                        }
                    },
                    c => word.push(c),
                }
            },
            '\\' => word.push(chars.next()?),
            c if c.is_whitespace() => return None,
            // Expansions would make the word something else at run time.
            '$' | '`' | ';' | '&' | '|' | '<' | '>' | '(' | ')' | '*' | '?' => return None,
            c => word.push(c),
        }
    }
    (!word.is_empty()).then_some(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_read_back_to_their_binary() {
        for path in [
            "/usr/local/bin/agentwatch",
            "/home/a b/.cargo/bin/agentwatch",
            "/opt/it's/agentwatch",
            "/tmp/x/agentwatch-dev",
        ] {
            for agent in Agent::ALL {
                let command = hook_command(Path::new(path), agent);
                assert_eq!(our_binary(&command, agent), Some(PathBuf::from(path)));
                let other = Agent::ALL.into_iter().find(|a| *a != agent).unwrap();
                assert_eq!(our_binary(&command, other), None, "{command}");
            }
        }
        assert_eq!(
            hook_command(Path::new("/usr/bin/agentwatch"), Agent::Claude),
            "/usr/bin/agentwatch hook claude"
        );
        assert_eq!(
            hook_command(Path::new("/a b/agentwatch"), Agent::Gemini),
            "'/a b/agentwatch' hook gemini"
        );
    }

    #[test]
    fn other_commands_are_not_ours() {
        for command in [
            "python3 guard.py hook claude",
            "/usr/bin/agentwatch hook claude --verbose",
            "echo hi; /usr/bin/agentwatch hook claude",
            "$HOME/bin/agentwatch hook claude",
            "/usr/bin/agentwatch-helper.sh x hook claude",
            "'/unclosed/agentwatch hook claude",
            " hook claude",
        ] {
            assert_eq!(our_binary(command, Agent::Claude), None, "{command}");
        }
        assert_eq!(
            our_binary("\"/a b/agentwatch\" hook claude", Agent::Claude),
            Some(PathBuf::from("/a b/agentwatch"))
        );
    }
}
