//! What agentwatch's own pre-tool hook did in a tree (issue 47): the calls it refused, the last
//! one as a person reads it, and whether it stopped a session. The caller counts them from the
//! agents' records; the lifecycle reports them once per change ([`Refusals::news_since`]).

use serde::{Deserialize, Serialize};

/// The refusals of agentwatch's hook in one session tree, as read so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refusals {
    /// Calls the hook refused (they never ran).
    #[serde(default)]
    pub blocked: u32,
    /// The last refused call as a person reads it (`pytest tests/test_x.py`); empty when the
    /// record does not say.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub call: String,
    /// How many of the refusals were of `call` (0: not counted, taken as all of them).
    #[serde(default)]
    pub of_call: u32,
    /// Whether the hook stopped a session of the tree (`stop` mode).
    #[serde(default)]
    pub stopped: bool,
}

impl Refusals {
    /// Nothing refused.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.blocked == 0 && !self.stopped
    }

    /// Whether these refusals say something `reported` did not: the first refusal, or the
    /// stop. Further refusals of a loop already reported are counted, not announced.
    #[must_use]
    pub fn news_since(&self, reported: &Refusals) -> bool {
        (self.blocked > 0 && reported.blocked == 0) || (self.stopped && !reported.stopped)
    }

    /// The sentence every surface shows: ``agentwatch blocked 3 calls of `pytest -x` ``, and
    /// `; the session stopped` after a stop; empty when nothing was refused.
    #[must_use]
    pub fn sentence(&self) -> String {
        if self.is_empty() {
            return String::new();
        }
        let calls = |n: u32| format!("{n} call{}", if n == 1 { "" } else { "s" });
        let call = self.call.trim();
        let mut out = format!("agentwatch blocked {}", calls(self.blocked));
        if !call.is_empty() {
            if self.of_call == 0 || self.of_call >= self.blocked {
                out.push_str(&format!(" of `{call}`"));
            } else {
                out.push_str(&format!(", {} of `{call}`", self.of_call));
            }
        }
        if self.stopped {
            out.push_str("; the session stopped");
        }
        out
    }

    /// The [`Refusals::sentence`] of refusals kept as JSON (an alert row's, an event's
    /// `details.blocked`); `None` when there are none or they do not read.
    #[must_use]
    pub fn sentence_of(value: Option<&serde_json::Value>) -> Option<String> {
        let refusals = Refusals::deserialize(value?).ok()?;
        (!refusals.is_empty()).then(|| refusals.sentence())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusals(blocked: u32, call: &str, of_call: u32, stopped: bool) -> Refusals {
        Refusals {
            blocked,
            call: call.to_owned(),
            of_call,
            stopped,
        }
    }

    /// Each row: the refusals and the sentence a person reads.
    #[test]
    fn the_sentence() {
        let rows = [
            (refusals(0, "", 0, false), ""),
            (
                refusals(1, "pytest tests/test_x.py", 1, false),
                "agentwatch blocked 1 call of `pytest tests/test_x.py`",
            ),
            (
                refusals(3, "pytest tests/test_x.py", 3, true),
                "agentwatch blocked 3 calls of `pytest tests/test_x.py`; the session stopped",
            ),
            (
                refusals(5, "read /w/a.rs", 2, false),
                "agentwatch blocked 5 calls, 2 of `read /w/a.rs`",
            ),
            (refusals(2, "", 0, false), "agentwatch blocked 2 calls"),
            (
                refusals(2, "make", 0, false),
                "agentwatch blocked 2 calls of `make`",
            ),
        ];
        for (r, sentence) in rows {
            assert_eq!(r.sentence(), sentence, "{r:?}");
        }
    }

    /// Each row: told before, seen now, whether it is news.
    #[test]
    fn news_is_the_first_refusal_and_the_stop() {
        let none = Refusals::default();
        let one = refusals(1, "make", 1, false);
        let three = refusals(3, "make", 3, false);
        let stopped = refusals(4, "make", 4, true);
        let rows = [
            (&none, &none, false),
            (&none, &one, true),
            (&one, &three, false),
            (&three, &stopped, true),
            (&none, &stopped, true),
            (&stopped, &stopped, false),
            // Fewer than told (a history read again): nothing new to say.
            (&three, &one, false),
        ];
        for (told, now, news) in rows {
            assert_eq!(now.news_since(told), news, "{told:?} -> {now:?}");
        }
    }
}
