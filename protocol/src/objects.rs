//! JSON bodies as the OpenAPI document describes them: structs read from objects only, and integers as JSON Schema
//! counts them.

/// Each struct given: written by serde's derived writer, read by its derived reader from a JSON object only. The
/// struct derives both with `#[serde(remote = "Self")]`, which makes them inherent functions that this calls.
macro_rules! object_only {
    ($type:ty, $expecting:literal) => {
        impl serde::Serialize for $type {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                <$type>::serialize(self, serializer)
            }
        }

        impl<'de> $crate::objects::Fields<'de> for $type {
            const EXPECTING: &'static str = $expecting;

            fn fields<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                <$type>::deserialize(deserializer)
            }
        }

        impl<'de> serde::Deserialize<'de> for $type {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_map($crate::objects::ObjectOnly(std::marker::PhantomData))
            }
        }
    };
}
pub(crate) use object_only;

/// A struct serde's derived reader reads, and what it is (for the error).
pub(crate) trait Fields<'de>: Sized {
    const EXPECTING: &'static str;
    fn fields<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error>;
}

/// Reads a struct from a JSON object only: serde's derived reader also takes the fields in order as a JSON array
/// (`[30, 100]`), which the schema does not allow and no client means.
pub(crate) struct ObjectOnly<T>(pub std::marker::PhantomData<T>);

impl<'de, T: Fields<'de>> serde::de::Visitor<'de> for ObjectOnly<T> {
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(T::EXPECTING)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::fields(serde::de::value::MapAccessDeserializer::new(map))
    }
}

/// A JSON number as a whole number ≥ 0, as JSON Schema's `integer` counts them: `1020` and `1020.0` alike; `None`
/// for a fraction, a negative number, or one beyond u64.
pub(crate) fn whole(number: &serde_json::Number) -> Option<u64> {
    if let Some(whole) = number.as_u64() {
        return Some(whole);
    }
    /// 2^64, beyond u64.
    const LIMIT: f64 = 18_446_744_073_709_551_616.0;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // whole and within u64: exact
    number.as_f64().filter(|float| float.fract() == 0.0 && *float >= 0.0 && *float < LIMIT).map(|float| float as u64)
}
