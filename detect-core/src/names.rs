//! The names a detector's span refers to (call identities, targets, paths, results), each kept
//! once and known by its number.
//!
//! They are written one after another into one buffer and found by their hash (issue 19: a name
//! used to be a shared string of its own, allocated when first seen and freed at each landing,
//! two or three per call). Two names of the same hash are told apart by their text.

use crate::hash::hash;
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;
use std::ops::Range;

/// `name` written after the others in `text`, its place the next in `places`: its number.
fn push_name(text: &mut String, places: &mut Vec<Range<usize>>, name: &str) -> u32 {
    let start = text.len();
    text.push_str(name);
    places.push(start..text.len());
    u32::try_from(places.len() - 1).unwrap_or(u32::MAX)
}

/// Numbered names: the first one interned is 0, the next new one 1, and so on.
#[derive(Debug, Clone, Default)]
pub(crate) struct Names {
    /// Every name's text, one after another.
    text: String,
    /// Where each name is in `text`, by number.
    places: Vec<Range<usize>>,
    /// A name's number by its hash: the first name of that hash.
    by_hash: FxHashMap<u64, u32>,
    /// The names whose hash an earlier name has (rare), by text.
    collided: FxHashMap<Box<str>, u32>,
}

impl Names {
    /// The number of `name`, numbering it when it is new.
    pub(crate) fn intern(&mut self, name: &str) -> u32 {
        self.intern_hashed(name, hash(name))
    }

    /// [`Names::intern`] of `name` whose [`hash`] is `hash` (computed once by
    /// a caller that needs it too).
    pub(crate) fn intern_hashed(&mut self, name: &str, hash: u64) -> u32 {
        // One look-up for a new name (most are), through the entry.
        let first = match self.by_hash.entry(hash) {
            Entry::Vacant(slot) => {
                let id = push_name(&mut self.text, &mut self.places, name);
                slot.insert(id);
                return id;
            }
            Entry::Occupied(slot) => *slot.get(),
        };
        if self.get(first) == name {
            return first;
        }
        match self.collided.get(name) {
            Some(&id) => id,
            None => {
                let id = self.push(name);
                self.collided.insert(name.into(), id);
                id
            }
        }
    }

    /// Number `name` as the next one, even when it has a number already (a snapshot's list of
    /// names is restored as it was written); it is found under its latest number.
    pub(crate) fn push_anew(&mut self, name: &str) -> u32 {
        let id = self.push(name);
        let hash = hash(name);
        match self.by_hash.get(&hash) {
            Some(&first) if self.get(first) != name => {
                self.collided.insert(name.into(), id);
            }
            _ => {
                self.by_hash.insert(hash, id);
            }
        }
        id
    }

    fn push(&mut self, name: &str) -> u32 {
        push_name(&mut self.text, &mut self.places, name)
    }

    /// The name numbered `id` (empty when there is none).
    pub(crate) fn get(&self, id: u32) -> &str {
        self.places
            .get(id as usize)
            .and_then(|place| self.text.get(place.clone()))
            .unwrap_or_default()
    }

    /// How many names are numbered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.places.len()
    }

    /// Forget every name (numbers start again from 0); the room is kept for the next ones.
    pub(crate) fn clear(&mut self) {
        self.text.clear();
        self.places.clear();
        self.by_hash.clear();
        self.collided.clear();
    }

    /// Give back spare room.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.text.shrink_to_fit();
        self.places.shrink_to_fit();
        self.by_hash.shrink_to_fit();
        self.collided.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Names are numbered in the order first seen, each found again under its number, as a
        /// map from text to number does; also after a clear, and with every name of one hash.
        #[test]
        fn names_number_as_a_map_does(
            rounds in proptest::collection::vec(
                proptest::collection::vec("[ab]{0,3}|x{0,40}|[é☃/ \"\\\\]{0,4}", 0..40), 1..4),
            one_hash in proptest::bool::ANY,
        ) {
            let mut names = Names::default();
            for round in rounds {
                names.clear();
                let mut map: std::collections::HashMap<String, u32> = Default::default();
                for name in &round {
                    let next = u32::try_from(map.len()).unwrap();
                    let want = *map.entry(name.clone()).or_insert(next);
                    // Every name as if of one hash: told apart by text alone.
                    let id = if one_hash {
                        names.intern_hashed(name, 0)
                    } else {
                        names.intern(name)
                    };
                    prop_assert_eq!(id, want);
                    prop_assert_eq!(names.get(want), name.as_str());
                }
                prop_assert_eq!(names.len(), map.len());
            }
        }
    }

    #[test]
    fn a_list_restored_as_written_finds_each_name_under_its_latest_number() {
        let mut names = Names::default();
        for name in ["a", "b", "a"] {
            names.push_anew(name);
        }
        assert_eq!((names.get(0), names.get(1), names.get(2)), ("a", "b", "a"));
        assert_eq!(names.intern("a"), 2);
        assert_eq!(names.intern("b"), 1);
        assert_eq!(names.intern("c"), 3);
        assert_eq!(names.get(9), "");
    }
}
