//! JSON values read as one expected type, without building a `serde_json::Value`: the value
//! when it has that type, `None` when it has any other (consumed, never an error). Gemini's
//! answers are read with these so that a field of an unexpected type counts as absent — as
//! the answer's module documentation promises — while the stream's bulk (text parts, usage
//! counts, the model name) is read in one typed pass, strings borrowed from the event's data
//! when they hold no escapes.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// A value of type `T`, or `None` when the JSON value had another type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lenient<T>(pub Option<T>);

impl<T> Lenient<T> {
    /// The value, when it had the expected type.
    pub fn get(&self) -> Option<&T> {
        self.0.as_ref()
    }
}

/// What a JSON scalar becomes; every conversion defaults to "not this type".
pub trait Scalar<'a>: Sized {
    /// A string that could be borrowed from the input.
    fn borrowed_str(_: &'a str) -> Option<Self> {
        None
    }
    /// A string that had to be unescaped (or a reader that cannot borrow).
    fn owned_str(_: &str) -> Option<Self> {
        None
    }
    /// A non-negative integer.
    fn unsigned(_: u64) -> Option<Self> {
        None
    }
    /// A negative integer.
    fn signed(_: i64) -> Option<Self> {
        None
    }
    /// A number with a fraction or an exponent.
    fn float(_: f64) -> Option<Self> {
        None
    }
    /// `true` or `false`.
    fn boolean(_: bool) -> Option<Self> {
        None
    }
}

impl<'a> Scalar<'a> for Cow<'a, str> {
    fn borrowed_str(s: &'a str) -> Option<Self> {
        Some(Cow::Borrowed(s))
    }
    fn owned_str(s: &str) -> Option<Self> {
        Some(Cow::Owned(s.to_owned()))
    }
}

impl Scalar<'_> for bool {
    fn boolean(b: bool) -> Option<Self> {
        Some(b)
    }
}

/// An integer as `serde_json::Value::as_u64` reads it: non-negative integers only (`0.0`
/// and `-1` are not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsigned(pub u64);

impl Scalar<'_> for Unsigned {
    fn unsigned(n: u64) -> Option<Self> {
        Some(Self(n))
    }
}

/// A token count: a non-negative integer, or an integral non-negative float (`3.0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count(pub u64);

impl Scalar<'_> for Count {
    fn unsigned(n: u64) -> Option<Self> {
        Some(Self(n))
    }
    fn float(f: f64) -> Option<Self> {
        // `as` saturates; the guard keeps fractions, negatives and non-finite values out.
        (f.is_finite() && f >= 0.0 && f.fract() == 0.0).then_some(Self(f as u64))
    }
}

struct ScalarVisitor<T>(PhantomData<T>);

impl<'de: 'a, 'a, T: Scalar<'a>> Visitor<'de> for ScalarVisitor<T> {
    type Value = Lenient<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Lenient(T::borrowed_str(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Lenient(T::owned_str(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Lenient(T::unsigned(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Lenient(match u64::try_from(v) {
            Ok(n) => T::unsigned(n),
            Err(_) => T::signed(v),
        }))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Lenient(T::float(v)))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Lenient(T::boolean(v)))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Lenient(None))
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Lenient(None))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Lenient(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Lenient(None))
    }
}

impl<'de: 'a, 'a, T: Scalar<'a>> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor(PhantomData))
    }
}

/// A JSON object read as `T`, or `None` when the value was not an object. `T`'s own fields
/// decide what else is an error (with [`Lenient`] fields, nothing but invalid JSON is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object<T>(pub Option<T>);

struct ObjectVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
    type Value = Object<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Object(None))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Object(None))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Object(None))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Object(None))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Object(None))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Object(None))
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Object(None))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Object(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(|t| Object(Some(t)))
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ObjectVisitor(PhantomData))
    }
}
