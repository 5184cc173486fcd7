//! Safe shaped tensors for the generated Rust bindings: borrowed [`TensorView`] /
//! [`TensorViewMut`] and (with `std`) owned [`Tensor`]. All are dense and row-major.
//!
//! They check that data length and shape agree and nothing else; they do not do
//! arithmetic, broadcasting or layout changes.

#[cfg(feature = "std")]
use std::vec::Vec;

use crate::{DType, Error, Status};

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for i32 {}
    impl Sealed for bool {}
}

/// An element type a model tensor can hold: `f32`, `i32` or `bool`.
pub trait Element: sealed::Sealed + Copy + Default + 'static {
    /// The matching [`DType`].
    const DTYPE: DType;
}
impl Element for f32 {
    const DTYPE: DType = DType::F32;
}
impl Element for i32 {
    const DTYPE: DType = DType::I32;
}
impl Element for bool {
    const DTYPE: DType = DType::Bool;
}

/// Number of elements of a shape, or `ShapeMismatch` if it overflows `usize`.
fn shape_len(dims: &[usize]) -> Result<usize, Error> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or(Error::Status(Status::ShapeMismatch))
}

/// A borrowed, dense, row-major tensor.
#[derive(Clone, Copy, Debug)]
pub struct TensorView<'a, T: Element> {
    data: &'a [T],
    dims: &'a [usize],
}

impl<'a, T: Element> TensorView<'a, T> {
    /// Views `data` with shape `dims`; fails with [`Status::ShapeMismatch`] unless
    /// `data.len()` is the product of `dims`.
    pub fn new(data: &'a [T], dims: &'a [usize]) -> Result<Self, Error> {
        if shape_len(dims)? != data.len() {
            return Err(Status::ShapeMismatch.into());
        }
        Ok(TensorView { data, dims })
    }

    /// The elements in row-major order.
    pub fn data(&self) -> &'a [T] {
        self.data
    }

    /// The extents, outermost first.
    pub fn dims(&self) -> &'a [usize] {
        self.dims
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        T::DTYPE
    }

    /// The element at a multi-index, or `None` if the index has the wrong rank or is out
    /// of range.
    pub fn get(&self, index: &[usize]) -> Option<T> {
        flat_index(self.dims, index).and_then(|i| self.data.get(i).copied())
    }
}

/// A mutably borrowed, dense, row-major tensor (an output buffer).
#[derive(Debug)]
pub struct TensorViewMut<'a, T: Element> {
    data: &'a mut [T],
    dims: &'a [usize],
}

impl<'a, T: Element> TensorViewMut<'a, T> {
    /// Views `data` with shape `dims`; fails with [`Status::ShapeMismatch`] unless
    /// `data.len()` is the product of `dims`.
    pub fn new(data: &'a mut [T], dims: &'a [usize]) -> Result<Self, Error> {
        if shape_len(dims)? != data.len() {
            return Err(Status::ShapeMismatch.into());
        }
        Ok(TensorViewMut { data, dims })
    }

    /// The elements in row-major order.
    pub fn data(&self) -> &[T] {
        self.data
    }

    /// The elements, mutably.
    pub fn data_mut(&mut self) -> &mut [T] {
        self.data
    }

    /// The extents, outermost first.
    pub fn dims(&self) -> &'a [usize] {
        self.dims
    }

    /// A read-only view of the same data.
    pub fn as_view(&self) -> TensorView<'_, T> {
        TensorView {
            data: self.data,
            dims: self.dims,
        }
    }
}

/// Row-major flat index of `index` in a tensor of shape `dims`.
fn flat_index(dims: &[usize], index: &[usize]) -> Option<usize> {
    if dims.len() != index.len() {
        return None;
    }
    let mut flat = 0usize;
    for (&d, &i) in dims.iter().zip(index) {
        if i >= d {
            return None;
        }
        flat = flat.checked_mul(d)?.checked_add(i)?;
    }
    Some(flat)
}

/// An owned, dense, row-major tensor.
#[cfg(feature = "std")]
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor<T: Element> {
    data: Vec<T>,
    dims: Vec<usize>,
}

#[cfg(feature = "std")]
impl<T: Element> Tensor<T> {
    /// A tensor of shape `dims` filled with `T::default()` (zero / false).
    pub fn zeros(dims: &[usize]) -> Result<Self, Error> {
        let len = shape_len(dims)?;
        Ok(Tensor {
            data: std::vec![T::default(); len],
            dims: dims.to_vec(),
        })
    }

    /// Takes ownership of `data` with shape `dims`; fails with [`Status::ShapeMismatch`]
    /// unless the lengths agree.
    pub fn from_vec(data: Vec<T>, dims: &[usize]) -> Result<Self, Error> {
        if shape_len(dims)? != data.len() {
            return Err(Status::ShapeMismatch.into());
        }
        Ok(Tensor {
            data,
            dims: dims.to_vec(),
        })
    }

    /// The elements in row-major order.
    pub fn data(&self) -> &[T] {
        &self.data
    }

    /// The elements, mutably.
    pub fn data_mut(&mut self) -> &mut [T] {
        &mut self.data
    }

    /// The extents, outermost first.
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// A borrowed view.
    pub fn view(&self) -> TensorView<'_, T> {
        TensorView {
            data: &self.data,
            dims: &self.dims,
        }
    }

    /// A mutable borrowed view.
    pub fn view_mut(&mut self) -> TensorViewMut<'_, T> {
        TensorViewMut {
            data: &mut self.data,
            dims: &self.dims,
        }
    }

    /// The elements, consuming the tensor.
    pub fn into_vec(self) -> Vec<T> {
        self.data
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_checks_shape() {
        let data = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let v = TensorView::new(&data, &[2, 3]).expect("shape agrees");
        assert_eq!(v.get(&[1, 2]), Some(6.0));
        assert_eq!(v.get(&[2, 0]), None);
        assert_eq!(v.get(&[0]), None);
        assert_eq!(v.dtype(), DType::F32);
        assert_eq!(
            TensorView::new(&data, &[4, 2]).err(),
            Some(Error::Status(Status::ShapeMismatch))
        );
        assert_eq!(
            TensorView::new(&data, &[usize::MAX, 2]).err(),
            Some(Error::Status(Status::ShapeMismatch))
        );
        let scalar = [7i32];
        assert_eq!(
            TensorView::new(&scalar, &[]).map(|v| v.get(&[])),
            Ok(Some(7))
        );
    }

    #[test]
    fn view_mut_writes() {
        let mut data = [false; 4];
        let mut v = TensorViewMut::new(&mut data, &[2, 2]).expect("shape agrees");
        v.data_mut()[3] = true;
        assert_eq!(v.as_view().get(&[1, 1]), Some(true));
    }

    #[cfg(feature = "std")]
    #[test]
    fn owned_tensor() {
        let t = Tensor::<i32>::zeros(&[3, 1]).expect("small shape");
        assert_eq!(t.data(), &[0, 0, 0]);
        assert_eq!(t.view().dims(), &[3, 1]);
        assert!(Tensor::from_vec(std::vec![1.0f32; 5], &[2, 2]).is_err());
    }
}
