//! The fast reader of one event's data ([`Frame::from_json`]): one pass over the JSON object, each field kept raw
//! until the frame's type says whether it has it.

use std::borrow::Cow;

use serde::de::Error as _;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::{Chunk, Frame};

impl Frame {
    /// Reads one event's data. `Ok(None)` for a frame type this version does not know (a newer server's), which a
    /// client should skip. Faster than `serde_json::from_slice::<Frame>`: one pass, no intermediate buffering of
    /// the tagged enum.
    ///
    /// It reads what serde's derived reader reads (the fuzz target `frames` holds it to that): a field the frame's
    /// type does not have is ignored whatever it holds and however often it comes, as a newer server's extensions
    /// must be. One decision of ours: an event's data is a JSON object. Serde's reader of a tagged enum also takes
    /// an array (the tag, then the variant's fields in their order), a form no server writes and this refuses.
    pub fn from_json(json: &[u8]) -> Result<Option<Frame>, serde_json::Error> {
        let FlatFrame { kind, data, fields } = serde_json::from_slice(json)?;
        let chunk = |data: Slot<DataField<'_>>| -> Result<Chunk, serde_json::Error> {
            Ok(Chunk {
                nl: fields.field("nl")?.unwrap_or(true),
                b64: fields.optional("b64")?,
                offset: fields.optional("offset")?,
                data: data.into_text()?,
            })
        };
        let needs = |name: &'static str, what: &'static str| {
            move || serde_json::Error::custom(format!("a dropped frame needs `{name}`: {what}"))
        };
        Ok(Some(match &*kind {
            "stdout" => Frame::Stdout(chunk(data)?),
            "stderr" => Frame::Stderr(chunk(data)?),
            "error" => Frame::Error { start_error: fields.optional("start_error")?, data: data.into_text()? },
            "dropped" => Frame::Dropped {
                stream: fields.field("stream").ok().flatten().ok_or_else(needs("stream", "stdout or stderr"))?,
                offset: fields.field("offset")?.ok_or_else(needs("offset", "an integer"))?,
                bytes: fields.field("bytes")?.ok_or_else(needs("bytes", "an integer"))?,
            },
            "exit" => match data {
                Slot::Once(DataField::Int(code)) => Frame::Exit {
                    data: i32::try_from(code).map_err(|_| serde_json::Error::custom("exit code out of range"))?,
                    timed_out: fields.field("timed_out")?.unwrap_or(false),
                    signal: fields.optional("signal")?,
                    duration_ms: fields.field("duration_ms")?.unwrap_or(0),
                    stdout_bytes: fields.optional("stdout_bytes")?,
                    stderr_bytes: fields.optional("stderr_bytes")?,
                    stopped_by: fields.optional("stopped_by")?,
                    stdin_consumed: fields.optional("stdin_consumed")?,
                },
                Slot::Repeated => return Err(serde_json::Error::duplicate_field("data")),
                _ => return Err(serde_json::Error::custom("an exit frame needs an integer `data`")),
            },
            _ => return Ok(None),
        }))
    }
}

/// One JSON object read as a frame: its type, its `data`, and every other field any frame may have, kept raw until
/// the type says whether it has that field (what [`Frame::from_json`] reads). A field read raw costs a scan of its
/// bytes, which for these (flags, numbers, short names) is next to nothing; `data`, the one that may be long, is
/// read once, as what it is.
struct FlatFrame<'a> {
    kind: Cow<'a, str>,
    data: Slot<DataField<'a>>,
    fields: RawFields<'a>,
}

/// Every field of one frame's object but `type` and `data`, as it came (see [`FlatFrame`]).
struct RawFields<'a>([Slot<&'a RawValue>; RAW_FIELDS.len()]);

/// The fields [`RawFields`] keeps: every field of every frame type but `type` and `data`.
const RAW_FIELDS: [&str; 13] = [
    "nl",
    "b64",
    "timed_out",
    "signal",
    "duration_ms",
    "offset",
    "stream",
    "bytes",
    "stdout_bytes",
    "stderr_bytes",
    "stopped_by",
    "start_error",
    "stdin_consumed",
];

/// A field of one JSON object: not there, there once, or there more than once (an error only in a frame type that
/// has the field, as serde's derived reader has it).
#[derive(Clone, Copy)]
enum Slot<T> {
    Absent,
    Once(T),
    Repeated,
}

impl<T> Slot<T> {
    fn fill(&mut self, value: T) {
        *self = match self {
            Slot::Absent => Slot::Once(value),
            Slot::Once(_) | Slot::Repeated => Slot::Repeated,
        };
    }
}

impl<'a> RawFields<'a> {
    /// Field `name` (one of [`RAW_FIELDS`]) read as a `T`, or `None` when it is not there.
    fn field<T: Deserialize<'a>>(&self, name: &'static str) -> Result<Option<T>, serde_json::Error> {
        let index = RAW_FIELDS.iter().position(|field| *field == name).expect("one of RAW_FIELDS");
        match self.0[index] {
            Slot::Absent => Ok(None),
            Slot::Once(raw) => serde_json::from_str(raw.get())
                .map(Some)
                .map_err(|error| serde_json::Error::custom(format_args!("`{name}`: {error}"))),
            Slot::Repeated => Err(serde_json::Error::duplicate_field(name)),
        }
    }

    /// An optional field, whose `null` is `None` too (as serde reads an `Option`).
    fn optional<T: Deserialize<'a>>(&self, name: &'static str) -> Result<Option<T>, serde_json::Error> {
        Ok(self.field::<Option<T>>(name)?.flatten())
    }
}

impl Slot<DataField<'_>> {
    /// `data` of an output or error frame: text (empty when absent), moved out, not copied (it may be long).
    fn into_text(self) -> Result<String, serde_json::Error> {
        match self {
            Slot::Absent => Ok(String::new()),
            Slot::Once(DataField::Text(text)) => Ok(text.into_owned()),
            Slot::Once(_) => Err(serde_json::Error::custom("data must be a string in this frame")),
            Slot::Repeated => Err(serde_json::Error::duplicate_field("data")),
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for FlatFrame<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = FlatFrame<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a frame: a JSON object with a `type`")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let (mut kind, mut data) = (None, Slot::Absent);
                let mut raw = [Slot::Absent; RAW_FIELDS.len()];
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Type if kind.is_some() => return Err(A::Error::duplicate_field("type")),
                        Key::Type => kind = Some(map.next_value::<Tag<'a>>()?.0),
                        Key::Data => data.fill(map.next_value()?),
                        Key::Raw(index) => raw[index].fill(map.next_value()?),
                        Key::Other => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                let kind = kind.ok_or_else(|| A::Error::missing_field("type"))?;
                Ok(FlatFrame { kind, data, fields: RawFields(raw) })
            }
        }
        deserializer.deserialize_map(Visitor(std::marker::PhantomData))
    }
}

/// A frame's `type`, borrowed from the event when it has no escapes.
#[derive(Deserialize)]
struct Tag<'a>(#[serde(borrow)] Cow<'a, str>);

/// A key of a frame's object, named without allocating.
enum Key {
    Type,
    Data,
    /// Index in [`RAW_FIELDS`].
    Raw(usize),
    Other,
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E>(self, name: &str) -> Result<Key, E> {
                Ok(match name {
                    "type" => Key::Type,
                    "data" => Key::Data,
                    _ => RAW_FIELDS.iter().position(|field| *field == name).map_or(Key::Other, Key::Raw),
                })
            }
        }
        deserializer.deserialize_identifier(Visitor)
    }
}

/// `data` is text in output and error frames and an integer in exit frames; anything else is kept as `Other`, which
/// only a frame type without `data` (dropped) accepts.
enum DataField<'a> {
    Text(Cow<'a, str>),
    Int(i64),
    Other,
}

impl<'de: 'a, 'a> Deserialize<'de> for DataField<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Visitor<'a> {
            type Value = DataField<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(DataField::Text(Cow::Borrowed(text)))
            }
            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(DataField::Text(Cow::Owned(text.to_owned())))
            }
            fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
                Ok(DataField::Text(Cow::Owned(text)))
            }
            fn visit_i64<E>(self, value: i64) -> Result<Self::Value, E> {
                Ok(DataField::Int(value))
            }
            fn visit_u64<E>(self, value: u64) -> Result<Self::Value, E> {
                // Out of i64's range is out of an exit code's too: refused where a frame needs an integer.
                Ok(i64::try_from(value).map_or(DataField::Other, DataField::Int))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(DataField::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(DataField::Other)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(DataField::Other)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(DataField::Other)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?.is_some() {}
                Ok(DataField::Other)
            }
        }
        deserializer.deserialize_any(Visitor(std::marker::PhantomData))
    }
}
