//! Lenient field types for reading records another program writes: a value of an unexpected
//! type is read as absent (and skipped without building it), never as an error that would
//! lose the whole line. Strings are borrowed from the line where it has no escapes.

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, de};
use std::borrow::Cow;
use std::fmt;

/// Visitor methods answering `$absent` for every scalar but strings (each type decides those),
/// for the types that read lists and objects themselves.
macro_rules! scalars_are_absent {
    ($absent:expr) => {
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok($absent)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok($absent)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok($absent)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok($absent)
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($absent)
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok($absent)
        }
    };
}

/// A string, or `None` for any other value.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Text<'a>(pub Option<Cow<'a, str>>);

impl<'a> Text<'a> {
    pub fn as_str(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// The text, owned, when present and not empty.
    pub fn non_empty(&self) -> Option<String> {
        self.as_str().filter(|s| !s.is_empty()).map(str::to_owned)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Text(match Scalar::deserialize(d)? {
            Scalar::Str(s) => Some(s),
            _ => None,
        }))
    }
}

/// A boolean, or `None` for any other value.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Flag(pub Option<bool>);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Flag(match Scalar::deserialize(d)? {
            Scalar::Bool(b) => Some(b),
            _ => None,
        }))
    }
}

/// A whole number that fits `u64`, or `None` for any other value.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Count(pub Option<u64>);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Count(match Scalar::deserialize(d)? {
            Scalar::Number(n) => u64::try_from(n).ok(),
            _ => None,
        }))
    }
}

/// Any JSON value as the scalar it is; lists and objects are skipped without building them.
enum Scalar<'a> {
    Str(Cow<'a, str>),
    Bool(bool),
    Number(i128),
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for Scalar<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Scalar<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Scalar::Str(Cow::Owned(v)))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Scalar::Bool(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Scalar::Number(v.into()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Scalar::Number(v.into()))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Scalar::Other)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Scalar::Other)
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Scalar::Other)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// `T` read from an object, or `None` for any other value.
#[derive(Debug)]
pub(crate) struct Obj<T>(pub Option<T>);

impl<T> Default for Obj<T> {
    fn default() -> Self {
        Obj(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(|t| Obj(Some(t)))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Obj(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Obj(None))
            }
            scalars_are_absent!(Obj(None));
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A string, or a `T` read from a list or an object (as `T` reads them), or absent for
/// anything else: a field that is text in some records and structured in others.
#[derive(Debug, Default)]
pub(crate) enum StrOr<'a, T> {
    #[default]
    Absent,
    Str(Cow<'a, str>),
    Other(T),
}

impl<'de: 'a, 'a, T: Deserialize<'de>> Deserialize<'de> for StrOr<'a, T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = StrOr<'de, T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(StrOr::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(StrOr::Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(StrOr::Str(Cow::Owned(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                T::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(StrOr::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(map)).map(StrOr::Other)
            }
            scalars_are_absent!(StrOr::Absent);
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A list of `T`, or empty for any other value.
#[derive(Debug)]
pub(crate) struct List<T>(pub Vec<T>);

impl<T> Default for List<T> {
    fn default() -> Self {
        List(Vec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = List<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    items.push(item);
                }
                Ok(List(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(List(Vec::new()))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(List(Vec::new()))
            }
            scalars_are_absent!(List(Vec::new()));
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Doc<'a> {
        #[serde(borrow)]
        s: Text<'a>,
        b: Flag,
        n: Count,
        o: Obj<Inner>,
        l: List<Count>,
    }

    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Inner {
        x: Count,
    }

    #[test]
    fn values_of_another_type_read_as_absent() {
        let wrong = r#"{"s":{"a":[1]},"b":"yes","n":-3,"o":[1,2],"l":{"k":1},"extra":true}"#;
        let doc: Doc<'_> = serde_json::from_str(wrong).unwrap();
        assert_eq!(doc.s.as_str(), None);
        assert_eq!((doc.b.0, doc.n.0), (None, None));
        assert!(doc.o.0.is_none() && doc.l.0.is_empty());
        let right = r#"{"s":"t","b":true,"n":7,"o":{"x":2},"l":[1,"a",3]}"#;
        let doc: Doc<'_> = serde_json::from_str(right).unwrap();
        assert_eq!(doc.s.as_str(), Some("t"));
        assert!(matches!(doc.s.0, Some(Cow::Borrowed(_))));
        assert_eq!((doc.b.0, doc.n.0), (Some(true), Some(7)));
        assert_eq!(doc.o.0.unwrap().x.0, Some(2));
        assert_eq!(
            doc.l.0.iter().map(|c| c.0).collect::<Vec<_>>(),
            [Some(1), None, Some(3)]
        );
    }
}
