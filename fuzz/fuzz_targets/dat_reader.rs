//! Fuzz target: `read_dat` on arbitrary bytes must return Ok or a typed error, never
//! panic or allocate more than the input justifies. Successful reads must be
//! self-consistent, and float32 tensors must write back to the same data bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nnefc_compiler::front::dat::{HEADER_LEN, ItemType, read_dat, write_dat};

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = read_dat(data) {
        assert_eq!(t.data.len(), t.shape.iter().product::<usize>());
        if t.item == ItemType::F32 {
            let again = write_dat(&t.data, t.item).expect("a float32 tensor that was read can be written");
            // Headers may differ (reserved words, unused extents); the data may not.
            assert_eq!(&again[HEADER_LEN..], &data[HEADER_LEN..]);
        }
    }
});
