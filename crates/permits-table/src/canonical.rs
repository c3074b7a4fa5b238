//! Canonical JSON written straight from `Serialize`, without building a `serde_json::Value` first.
//!
//! The output is byte for byte what `serde_json::to_value` followed by the key-sorting writer gives
//! (objects with their keys sorted bytewise, no insignificant whitespace, or the two-space pretty layout of
//! `permitc compile`), which the tests below check against that reference. It exists because building the
//! `Value` tree of a whole table, sorting it and dropping it was most of `Table::load`, `seal` and the
//! compiler's digests.
//!
//! How an object is sorted without a tree: its entries are written as they come, each entry's raw key is
//! kept in a side arena, and when the object ends, if the keys were not already in order, the entries'
//! bytes are copied out and written back in key order. Maps of the table are `BTreeMap`s keyed by strings,
//! which arrive sorted and cost nothing; structs' fields usually need the copy.

use serde::ser::{self, Serialize};
use sha2::{Digest, Sha256};

/// Canonical JSON of `value`: sorted keys, no whitespace, or the pretty layout when `indent` is set.
/// `skip_top_field` leaves out one field of the outermost struct (the table's `header`).
pub(crate) fn to_canonical_bytes<T: Serialize + ?Sized>(
    value: &T,
    indent: Option<usize>,
    skip_top_field: Option<&'static str>,
) -> Result<Vec<u8>, serde_json::Error> {
    let mut w = Writer {
        out: Vec::new(),
        indent,
        depth: 0,
        keys: String::new(),
        entries: Vec::new(),
        scratch: Vec::new(),
        skip_top_field,
    };
    value.serialize(&mut w)?;
    Ok(w.out)
}

/// A JSON string, as `serde_json` writes it. Most strings of a table (names, digests, labels) have nothing to
/// escape: those are copied in one piece; any other goes through `serde_json`.
fn write_json_string(out: &mut Vec<u8>, s: &str) -> Result<(), serde_json::Error> {
    out.reserve(s.len() + 2);
    out.push(b'"');
    push_json_escaped(out, s);
    out.push(b'"');
    Ok(())
}

/// Appends the inside of `s` as a JSON string (without the quotes), escaped as `serde_json` escapes: `"`,
/// `\` and control characters, nothing else. Escaping goes character by character, so pieces escaped one by
/// one give the escape of their concatenation (the compiler's definition digests rely on it).
pub fn push_json_escaped(out: &mut Vec<u8>, s: &str) {
    if !needs_escape(s.as_bytes()) {
        out.extend_from_slice(s.as_bytes());
        return;
    }
    // INVARIANT: a `str` always serializes.
    let quoted = serde_json::to_string(s).expect("a string serializes");
    if let Some(inner) = quoted.strip_prefix('"').and_then(|q| q.strip_suffix('"')) {
        out.extend_from_slice(inner.as_bytes());
    }
}

/// Whether a string has a byte JSON escapes: a control character (below 0x20), `"` or `\`. Eight bytes
/// at a time: `x - 0x20 per byte & !x & 0x80 per byte` is nonzero exactly when a byte of `x` is below 0x20
/// (and `x ^ c per byte` has a zero byte exactly where `x` has `c`).
fn needs_escape(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let below = |x: u64, n: u64| x.wrapping_sub(ONES * n) & !x & HIGH != 0;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        if below(x, 0x20) || below(x ^ (ONES * 0x22), 1) || below(x ^ (ONES * 0x5c), 1) {
            return true;
        }
    }
    chunks.remainder().iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\')
}

/// One member of an object being written: its raw key (a range of `Writer::keys`) and its bytes (a range
/// of `Writer::out`, without the separator before it).
#[derive(Clone, Copy)]
struct Member {
    key: (usize, usize),
    bytes: (usize, usize),
}

struct Writer {
    out: Vec<u8>,
    indent: Option<usize>,
    depth: usize,
    /// The raw keys of the objects being written, innermost last.
    keys: String,
    /// The members of the objects being written, innermost last (a stack: an inner object ends before
    /// its parent's next member starts).
    entries: Vec<Member>,
    /// Reused for reordering an object's members.
    scratch: Vec<u8>,
    skip_top_field: Option<&'static str>,
}

impl Writer {
    fn newline(&mut self, depth: usize) {
        if let Some(width) = self.indent {
            self.out.push(b'\n');
            self.out.resize(self.out.len() + width * depth, b' ');
        }
    }

    fn string(&mut self, s: &str) -> Result<(), serde_json::Error> {
        write_json_string(&mut self.out, s)
    }

    fn number<N: Serialize>(&mut self, n: N) -> Result<(), serde_json::Error> {
        serde_json::to_writer(&mut self.out, &n)
    }

    /// Starts an object or an array at the current depth.
    fn open(&mut self, bracket: u8) -> Compound<'_> {
        self.out.push(bracket);
        self.depth += 1;
        let (keys, entries) = (self.keys.len(), self.entries.len());
        Compound { w: self, keys, entries, first: true, skip: None }
    }

    /// Writes the separator before a member or an item.
    fn separator(&mut self, first: bool) {
        if !first {
            self.out.push(b',');
        }
        let depth = self.depth;
        self.newline(depth);
    }

    /// Writes `"key":` (or `"key": `) for a member whose raw key is the last one in `keys` from `from`.
    fn key_colon(&mut self, from: usize) -> Result<(), serde_json::Error> {
        write_json_string(&mut self.out, &self.keys[from..])?;
        self.out.push(b':');
        if self.indent.is_some() {
            self.out.push(b' ');
        }
        Ok(())
    }
}

/// An object or array being written.
struct Compound<'w> {
    w: &'w mut Writer,
    /// Where this object's keys and members start in the writer's stacks.
    keys: usize,
    entries: usize,
    first: bool,
    /// The top-level field to leave out, for the outermost struct.
    skip: Option<&'static str>,
}

impl<'w> Compound<'w> {
    /// Starts a member whose raw key is `key`; returns the member's index in `entries`.
    fn begin_member(&mut self, key: &str) -> Result<usize, serde_json::Error> {
        let first = self.first;
        self.first = false;
        self.w.separator(first);
        let kstart = self.w.keys.len();
        self.w.keys.push_str(key);
        self.begin_member_with_key(kstart)
    }

    /// Starts a member whose raw key was already pushed to `keys` from `kstart`.
    fn begin_member_with_key(&mut self, kstart: usize) -> Result<usize, serde_json::Error> {
        let kend = self.w.keys.len();
        let start = self.w.out.len();
        self.w.key_colon(kstart)?;
        self.w.entries.push(Member { key: (kstart, kend), bytes: (start, start) });
        Ok(self.w.entries.len() - 1)
    }

    fn end_member(&mut self, index: usize) {
        let end = self.w.out.len();
        self.w.entries[index].bytes.1 = end;
    }

    fn member<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), serde_json::Error> {
        let i = self.begin_member(key)?;
        value.serialize(&mut *self.w)?;
        self.end_member(i);
        Ok(())
    }

    fn item<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), serde_json::Error> {
        let first = self.first;
        self.first = false;
        self.w.separator(first);
        value.serialize(&mut *self.w)
    }

    fn close_array(self) -> &'w mut Writer {
        let w = self.w;
        w.depth -= 1;
        if !self.first {
            let depth = w.depth;
            w.newline(depth);
        }
        w.out.push(b']');
        w
    }

    /// Ends an object: puts its members in key order if they are not, then the closing brace.
    fn close_object(self) -> &'w mut Writer {
        let w = self.w;
        w.depth -= 1;
        let members = &mut w.entries[self.entries..];
        if !members.is_empty() {
            let keys = &w.keys;
            let key = |m: &Member| &keys.as_bytes()[m.key.0..m.key.1];
            let sorted = members.windows(2).all(|p| key(&p[0]) <= key(&p[1]));
            if !sorted {
                // The members are contiguous in `out`, separated by the same separator; rewrite them in
                // key order (a stable sort, like the reference's sort of distinct keys).
                let region = members[0].bytes.0;
                w.scratch.clear();
                w.scratch.extend_from_slice(&w.out[region..]);
                members.sort_by(|a, b| key(a).cmp(key(b)));
                w.out.truncate(region);
                let depth = w.depth + 1;
                for (i, m) in members.iter().enumerate() {
                    if i > 0 {
                        w.out.push(b',');
                        if let Some(width) = w.indent {
                            w.out.push(b'\n');
                            w.out.resize(w.out.len() + width * depth, b' ');
                        }
                    }
                    w.out.extend_from_slice(&w.scratch[m.bytes.0 - region..m.bytes.1 - region]);
                }
            }
            let depth = w.depth;
            w.newline(depth);
        }
        w.out.push(b'}');
        w.keys.truncate(self.keys);
        w.entries.truncate(self.entries);
        w
    }
}

type Error = serde_json::Error;

impl<'w> ser::Serializer for &'w mut Writer {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'w>;
    type SerializeTuple = Compound<'w>;
    type SerializeTupleStruct = Compound<'w>;
    type SerializeTupleVariant = Variant<'w>;
    type SerializeMap = Compound<'w>;
    type SerializeStruct = Compound<'w>;
    type SerializeStructVariant = Variant<'w>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.out.extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        // As `to_value`: a `Number` when it fits in 64 bits, an error otherwise.
        let value = serde_json::to_value(v)?;
        self.number(value)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.number(v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        let value = serde_json::to_value(v)?;
        self.number(value)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        // `to_value` widens an `f32` to `f64` (and makes a non-finite one `null`).
        self.serialize_f64(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        let value = serde_json::to_value(v)?;
        self.number(value)
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.string(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.string(v)
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        let mut seq = self.open(b'[');
        for b in v {
            seq.item(b)?;
        }
        seq.close_array();
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.serialize_none()
    }
    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> Result<(), Error> {
        self.string(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _name: &'static str, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        let mut object = self.open(b'{');
        object.member(variant, value)?;
        object.close_object();
        Ok(())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Compound<'w>, Error> {
        Ok(self.open(b'['))
    }
    fn serialize_tuple(self, _len: usize) -> Result<Compound<'w>, Error> {
        Ok(self.open(b'['))
    }
    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Compound<'w>, Error> {
        Ok(self.open(b'['))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Variant<'w>, Error> {
        Variant::open(self, variant, b'[')
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Compound<'w>, Error> {
        Ok(self.open(b'{'))
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Compound<'w>, Error> {
        let skip = if self.depth == 0 { self.skip_top_field } else { None };
        let mut object = self.open(b'{');
        object.skip = skip;
        Ok(object)
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Variant<'w>, Error> {
        Variant::open(self, variant, b'{')
    }
}

impl ser::SerializeSeq for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.item(value)
    }
    fn end(self) -> Result<(), Error> {
        self.close_array();
        Ok(())
    }
}

impl ser::SerializeTuple for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.item(value)
    }
    fn end(self) -> Result<(), Error> {
        self.close_array();
        Ok(())
    }
}

impl ser::SerializeTupleStruct for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.item(value)
    }
    fn end(self) -> Result<(), Error> {
        self.close_array();
        Ok(())
    }
}

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        let first = self.first;
        self.first = false;
        self.w.separator(first);
        let kstart = self.w.keys.len();
        key.serialize(KeyWriter { keys: &mut self.w.keys })?;
        self.begin_member_with_key(kstart)?;
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(&mut *self.w)?;
        let i = self.w.entries.len() - 1;
        self.end_member(i);
        Ok(())
    }
    fn end(self) -> Result<(), Error> {
        self.close_object();
        Ok(())
    }
}

impl ser::SerializeStruct for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        if self.skip == Some(key) {
            return Ok(());
        }
        self.member(key, value)
    }
    fn end(self) -> Result<(), Error> {
        self.close_object();
        Ok(())
    }
}

/// `{"variant": [..]}` or `{"variant": {..}}`: the outer one-member object and the inner compound.
struct Variant<'w> {
    inner: Compound<'w>,
    /// The outer object's stack marks, restored when the variant ends.
    outer_keys: usize,
    outer_entries: usize,
}

impl<'w> Variant<'w> {
    fn open(w: &'w mut Writer, variant: &'static str, bracket: u8) -> Result<Variant<'w>, Error> {
        let (outer_keys, outer_entries) = (w.keys.len(), w.entries.len());
        w.out.push(b'{');
        w.depth += 1;
        let depth = w.depth;
        w.newline(depth);
        w.string(variant)?;
        w.out.push(b':');
        if w.indent.is_some() {
            w.out.push(b' ');
        }
        Ok(Variant { inner: w.open(bracket), outer_keys, outer_entries })
    }

    fn close(self, bracket: u8) {
        let Variant { inner, outer_keys, outer_entries } = self;
        let w = if bracket == b'[' { inner.close_array() } else { inner.close_object() };
        w.depth -= 1;
        let depth = w.depth;
        w.newline(depth);
        w.out.push(b'}');
        w.keys.truncate(outer_keys);
        w.entries.truncate(outer_entries);
    }
}

impl ser::SerializeTupleVariant for Variant<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.inner.item(value)
    }
    fn end(self) -> Result<(), Error> {
        self.close(b'[');
        Ok(())
    }
}

impl ser::SerializeStructVariant for Variant<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        self.inner.member(key, value)
    }
    fn end(self) -> Result<(), Error> {
        self.close(b'{');
        Ok(())
    }
}

/// Writes a map key's raw text to the key arena. Like `serde_json`'s map keys: strings, unit variants,
/// characters, integers and booleans (as their text); anything else is an error.
struct KeyWriter<'k> {
    keys: &'k mut String,
}

fn key_must_be_a_string() -> Error {
    ser::Error::custom("key must be a string")
}

impl KeyWriter<'_> {
    fn text(self, s: &str) -> Result<(), Error> {
        self.keys.push_str(s);
        Ok(())
    }
}

impl ser::Serializer for KeyWriter<'_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = ser::Impossible<(), Error>;
    type SerializeTuple = ser::Impossible<(), Error>;
    type SerializeTupleStruct = ser::Impossible<(), Error>;
    type SerializeTupleVariant = ser::Impossible<(), Error>;
    type SerializeMap = ser::Impossible<(), Error>;
    type SerializeStruct = ser::Impossible<(), Error>;
    type SerializeStructVariant = ser::Impossible<(), Error>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.text(if v { "true" } else { "false" })
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.text(&v.to_string())
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.text(&v.to_string())
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.text(&v.to_string())
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.text(&v.to_string())
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.text(&v.to_string())
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.text(&v.to_string())
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.text(&v.to_string())
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.text(&v.to_string())
    }
    fn serialize_f32(self, _v: f32) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_f64(self, _v: f64) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.text(v.encode_utf8(&mut [0; 4]))
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        self.text(v)
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_none(self) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> Result<(), Error> {
        self.text(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _name: &'static str, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeTupleStruct, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeStruct, Error> {
        Err(key_must_be_a_string())
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(key_must_be_a_string())
    }
}

/// SHA-256 of `bytes` as 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex of a byte string.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

/// The canonical JSON of a serializable value: keys sorted, no whitespace (spec §4).
///
/// Errors: serde's, for a value that cannot be JSON (a map with non-string keys).
pub fn canonical_json<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    let bytes = to_canonical_bytes(value, None, None)?;
    String::from_utf8(bytes).map_err(serde::ser::Error::custom)
}

/// SHA-256 (hex) of the canonical JSON of a serializable value (see [`canonical_json`]), without building
/// the string.
///
/// Errors: serde's, for a value that cannot be JSON (a map with non-string keys).
pub fn canonical_digest<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    Ok(sha256_hex(&to_canonical_bytes(value, None, None)?))
}

/// The canonical JSON of a JSON value: keys sorted (explicitly, whatever map type serde_json uses),
/// no whitespace.
pub fn canonical_value(value: &serde_json::Value) -> String {
    // INVARIANT: a `Value`'s map keys are strings, so it always serializes.
    canonical_json(value).expect("a JSON value serializes")
}

/// The reference the canonical writer is tested against (here and by the compiler's tests on real
/// tables): the `Value` tree, keys sorted explicitly. Slow; not for use.
#[doc(hidden)]
pub fn reference_canonical(value: &serde_json::Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out, None, 0);
    out
}

/// [`reference_canonical`] with two-space indentation: the reference of [`Table::to_pretty_json`].
#[doc(hidden)]
pub fn reference_pretty(value: &serde_json::Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out, Some(2), 0);
    out
}

fn write_canonical(value: &serde_json::Value, out: &mut String, indent: Option<usize>, depth: usize) {
    use serde_json::Value;
    let newline = |out: &mut String, depth: usize| {
        if let Some(width) = indent {
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', width * depth));
        }
    };
    match value {
        Value::Object(map) => {
            if map.is_empty() {
                out.push_str("{}");
                return;
            }
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                out.push_str(&serde_json::Value::String(key.clone()).to_string());
                out.push(':');
                if indent.is_some() {
                    out.push(' ');
                }
                if let Some(v) = map.get(key) {
                    write_canonical(v, out, indent, depth + 1);
                }
            }
            newline(out, depth);
            out.push('}');
        }
        Value::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                newline(out, depth + 1);
                write_canonical(item, out, indent, depth + 1);
            }
            newline(out, depth);
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `needs_escape` says what a byte-by-byte look says, for every byte value at every position of
    /// strings of 0 to 19 bytes (so in whole words and in the tail), and `write_json_string` writes what
    /// `serde_json` writes.
    #[test]
    fn the_word_at_a_time_escape_check_is_exact() {
        for len in 0..20usize {
            for at in 0..len.max(1) {
                for b in 0..=255u8 {
                    let mut bytes = vec![b'a'; len];
                    if let Some(x) = bytes.get_mut(at) {
                        *x = b;
                    }
                    let slow = bytes.iter().any(|&c| c < 0x20 || c == b'"' || c == b'\\');
                    assert_eq!(needs_escape(&bytes), slow, "{bytes:?}");
                    if let Ok(text) = std::str::from_utf8(&bytes) {
                        let mut out = Vec::new();
                        write_json_string(&mut out, text).unwrap_or_default();
                        assert_eq!(out, serde_json::to_vec(text).unwrap_or_default(), "{text:?}");
                    }
                }
            }
        }
    }
}
