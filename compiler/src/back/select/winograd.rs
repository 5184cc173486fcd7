//! Winograd F(2×2, 3×3) and F(4×4, 3×3) for dense 3×3 stride-1 convolutions with a
//! constant filter: 2.25× and 4× fewer multiplications than im2col + GEMM, the rest being
//! cheap transforms.
//!
//! With `d` an `s×s` input tile (`s` = 4 or 6, `s − 2` between tiles), `g` a 3×3 filter
//! slice: `U = G g Gᵀ` (at compile time, in f64, rounded once), `V = Bᵀ d B` (input
//! transform), `M_t = U_t · V_t` for the `s²` positions `t` (one batched runtime GEMM:
//! `cout × cin` by `cin × tiles`), `Y = Aᵀ M A` (output transform, plus bias, the fused
//! residual and activation). F(2×2)'s transforms only use 0, ±1, ±½, so the result
//! differs from the direct sum by a few ulps; F(4×4)'s (points 0, ±1, ±2) by somewhat
//! more (about 1e-5 relative on a 512-channel sum). Special values: a NaN input reaches
//! exactly the outputs whose window holds it, but an infinite input appears with both
//! signs in the transformed values an output sums, so an output that is ±∞ directly
//! becomes NaN here (∞ − ∞; its fused activation then gives NaN too). Guarding that would
//! cost a test per tile.
//!
//! F(4×4) is taken where the runtime's transforms read the conv's input in place
//! ([`Input::InPlace`]) and the map has enough of its tiles for the products to
//! outweigh the larger transformed filter ([`f4_pays`]); F(2×2) elsewhere. The input
//! transform is the runtime's `nnefc_winograd_in` where the target takes the runtime's
//! window kernels (`Lowering::runtime_windows`) and the view's rows are contiguous, else
//! the 16 loop nests of [`input_loops`]; the output transform likewise
//! `nnefc_winograd_out`, else 4 loop nests (F(2×2) only).
//!
//! Not here: other tile sizes, strided/dilated/grouped convs, the self-contained mode
//! (the caller only routes 2-d, 3×3, stride 1, dilation 1, one group, constant filter).

use super::conv::{ConvIo, Fusion, bias_strides};
use super::window::View;
use super::{Lowering, strides};
use crate::back::CodegenError;
use crate::back::kernel::{
    APacking, Activation, BufId, Expr, ExprId, GemmCall, GemmEpi, Matrix, Step, WindowCall,
    WindowOp, WinogradBands,
};
use crate::ir::{BinaryOp, DType, UnaryOp};

/// `Bᵀ`: row `a` gives the coefficients of input row/column `i` in `V[a]`.
const BT: [[f32; 4]; 4] = [
    [1.0, 0.0, -1.0, 0.0],
    [0.0, 1.0, 1.0, 0.0],
    [0.0, -1.0, 1.0, 0.0],
    [0.0, 1.0, 0.0, -1.0],
];
/// `G` (4×3).
const G: [[f32; 3]; 4] = [
    [1.0, 0.0, 0.0],
    [0.5, 0.5, 0.5],
    [0.5, -0.5, 0.5],
    [0.0, 0.0, 1.0],
];
/// `Aᵀ` (2×4).
const AT: [[f32; 4]; 2] = [[1.0, 1.0, 1.0, 0.0], [0.0, 1.0, -1.0, -1.0]];

/// Fewest input channels for the Winograd path. It saves `5·cin` multiply-adds per
/// output but its output transform costs about as much as ~30 of them (scalar: its
/// stores step 2 elements). On resnet18 (cin ≥ 64, 7×7 to 56×56) it gains about 25%.
/// On squeezenet1_1 an Intel Xeon measured the gain within noise for cin 16–64; on the
/// AMD Zen 4 development machine its cin-32 and cin-48 layers go from 0.58 to 0.46 ms
/// and from 0.31 to 0.27 ms and the model from 8.25 to 7.8–8.0 ms (`nnefc bench`), while
/// the cin-16 ones gain nothing (0.66 → 0.66–0.71 ms), hence 32.
const MIN_CIN: usize = 32;

/// Fewest input channels for the Winograd path when its transforms are the runtime's
/// vector kernels (`Lowering::runtime_windows`). squeezenet1_1's two 16→64 layers on
/// 55×55 maps (Zen 5, one thread, `nnefc bench --profile`, three interleaved runs):
/// 0.276–0.281 and 0.272–0.278 ms through the direct kernel, 0.249–0.254 and
/// 0.225–0.229 through Winograd.
const MIN_CIN_RUNTIME: usize = 16;

/// Fewest tiles for the Winograd path. With few tiles the 16 GEMMs have few columns
/// and their transformed filter (16/9 the filter's size) is streamed for little work, so
/// the answer for resnet18's 512-channel 7×7 layers (16 tiles) depends on the machine:
/// on an Intel Xeon (2 AVX-512 FMA ports) each took 3.1–3.5 ms against 3.0 ms for the
/// direct im2col GEMM, whose 49 columns fill only three quarters of the 64-wide tile; on
/// the AMD Zen 4 development machine each takes 2.25 ms against 2.9 (the 16-column
/// products run at 104 GFLOP/s there) and the whole model 30.6–31.6 ms against 33.2–34.2
/// (`nnefc bench --profile`, twice each way). Fewer than 16 tiles (outputs of 6×6 and
/// below) stay direct.
const MIN_TILES: usize = 16;

/// Whether the Winograd path pays off: enough channels for the GEMMs and enough tiles.
/// `runtime_transforms`: the transforms are the runtime's kernels.
pub(super) fn worthwhile(cin: usize, cout: usize, tiles: usize, runtime_transforms: bool) -> bool {
    let min_cin = if runtime_transforms {
        MIN_CIN_RUNTIME
    } else {
        MIN_CIN
    };
    cin >= min_cin && cout >= 16 && tiles >= MIN_TILES
}

/// `G` of F(4×4, 3×3) (6×3), Lavin's points 0, ±1, ±2 (the runtime's `winograd4.rs`
/// has the matching `Bᵀ` and `Aᵀ`).
const G4: [[f64; 3]; 6] = [
    [1.0 / 4.0, 0.0, 0.0],
    [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
    [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
    [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
    [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
    [0.0, 0.0, 1.0],
];

/// The tile size of a Winograd conv.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tiles {
    /// F(2×2, 3×3): 4×4 input tiles, 16 products.
    F2,
    /// F(4×4, 3×3): 6×6 input tiles, 36 products (the runtime's transforms only).
    F4,
}

impl Tiles {
    /// Outputs per tile side (and input rows/columns between tiles).
    fn out(self) -> usize {
        match self {
            Tiles::F2 => 2,
            Tiles::F4 => 4,
        }
    }

    /// Input elements per tile side.
    fn side(self) -> usize {
        self.out() + 2
    }

    /// Elements per transformed tile: the number of products.
    fn planes(self) -> usize {
        self.side() * self.side()
    }

    /// `G` as f64 rows.
    fn g(self) -> Vec<[f64; 3]> {
        match self {
            Tiles::F2 => G.iter().map(|r| r.map(f64::from)).collect(),
            Tiles::F4 => G4.to_vec(),
        }
    }
}

/// Fewest F(4×4) tiles for the F(4×4) path (with the runtime's transforms): maps of
/// 21×21 and up. Zen 5, one thread (`nnefc bench --profile`): squeezenet1_1's 16→64
/// layers on 55×55 maps 0.24 → 0.18 ms and 32→128 on 27×27 0.178 → 0.15 ms; whole models
/// (`nnefc bench`, interleaved) squeezenet1_1 3.0 → 2.8–2.9 ms, resnet18 12.3–12.4 →
/// 10.8–11.2 ms.
const MIN_TILES_F4: usize = 36;

/// Fewest F(4×4) tiles for the F(4×4) path when its transformed filter is small
/// ([`SMALL_F4_FILTER`]). On 13×13 and 14×14 maps (16 tiles of 4×4 outputs against 49
/// of 2×2) the products shrink by a quarter but the transformed filter, which the
/// products stream once, grows 2.25×: squeezenet1_1's 48→192 and 64→256 layers (1.3 and
/// 2.4 MB of F(4×4) filter) go from 0.106 to 0.096 ms and from 0.170 to 0.159–0.171 ms,
/// resnet18's four 256→256 layers on 14×14 maps (9.4 MB each) from 2.35–2.38 to
/// 2.48–2.6 ms together (`nnefc bench --profile`, Zen 5, one thread).
const MIN_TILES_F4_SMALL: usize = 16;

/// Bytes of F(4×4) filter up to which [`MIN_TILES_F4_SMALL`] applies.
const SMALL_F4_FILTER: usize = 5 << 19;

/// Fewest tiles a row for which the fused products and output transform of F(4×4)
/// (`nnefc_winograd_fused`) take one 16-tile vector per tile row.
const MIN_FUSED_ROW: usize = 12;

/// Most input channels for which narrow tile rows (below [`MIN_FUSED_ROW`]) take the
/// fused kernel. Its steps read the transformed input of their tiles once per block of
/// 8 output channels: with few input channels that block stays in L1, with many it
/// streams from L2 where the batched GEMM blocks it.
const MAX_FUSED_NARROW_CIN: usize = 32;

/// Whether F(4×4) on `ty × tx` tiles from `cin` channels takes the fused products and
/// output transform: rows of 12 or more tiles (one vector of 16 a row), and, from at
/// most [`MAX_FUSED_NARROW_CIN`] channels, planes of two or more full or nearly full
/// vectors (pairs of rows of 5–7 tiles, rows a multiple of 4 tiles wide taken 16 tiles at
/// a time across rows). Not rows of 9–11 tiles, which would leave a vector a third empty,
/// nor planes of one vector (a 13×13 map's 16 tiles), whose steps broadcast a weight per
/// multiply-add. Zen 5, one thread, `nnefc bench --profile --per-step`, batched products
/// + output transform → fused: squeezenet1_1's 27×27 layers (7-tile rows, 32 channels)
/// 0.108 + 0.024 → 0.110 ms; its 13×13 ones (one vector) 0.126 + 0.016 → 0.155 and
/// 0.070 + 0.012 → 0.091; resnet18's 28×28 ones (128 channels) 0.38 + 0.03 → 0.78.
fn fused_pays(ty: usize, tx: usize, cin: usize) -> bool {
    if tx >= MIN_FUSED_ROW {
        return true;
    }
    let vectors = if (5..8).contains(&tx) {
        ty.div_ceil(2)
    } else {
        (ty * tx).div_ceil(16)
    };
    cin <= MAX_FUSED_NARROW_CIN && vectors >= 2 && (tx.is_multiple_of(4) || (5..8).contains(&tx))
}

/// Where a Winograd layer's results go: the output (the fused chain's, else the conv's)
/// and its strides, the bias and its stride, the residual and the activation.
struct Outputs {
    y: BufId,
    strides: Vec<i64>,
    bias: (BufId, i64),
    residual: Option<BufId>,
    activation: Activation,
}

/// The [`Outputs`] of the conv `io` with the epilogue `fusion`, `cout` channels.
fn outputs(
    lw: &mut Lowering<'_>,
    io: &ConvIo,
    fusion: Option<&Fusion>,
    cout: usize,
) -> Result<Outputs, CodegenError> {
    let (out, activation, residual) = match fusion {
        Some(fu) => (fu.out, fu.activation, fu.residual),
        None => (io.y, Activation::None, None),
    };
    // The bias before the output: `Lowering::buf` numbers buffers and constants on first
    // use, and the kernels dump shows those numbers.
    let (bg, _) = bias_strides(lw, io.b, cout)?;
    let bias = (lw.buf(io.b)?, bg);
    let y = lw.buf(out)?;
    let residual = match residual {
        Some(r) => Some(lw.buf(r)?),
        None => None,
    };
    Ok(Outputs {
        y,
        strides: strides(&io.ys),
        bias,
        residual,
        activation,
    })
}

/// The F(4×4) products fused with the output transform as one runtime call
/// ([`WindowOp::WinogradFused`], `dims` its output geometry): reading `x`, the input
/// transform's planes, or with `banded` the conv's input (both transforms and the
/// products band by band).
fn fused_call(
    lw: &mut Lowering<'_>,
    io: &ConvIo,
    fusion: Option<&Fusion>,
    filter: &[f32],
    dims: [usize; 14],
    x: (BufId, i64, [i64; 3]),
    banded: Option<WinogradBands>,
) -> Result<(), CodegenError> {
    let (cin, cout) = (io.xs[1], io.ys[1]);
    let out = outputs(lw, io, fusion, cout)?;
    let u = transform_filter(filter, cout, cin, Tiles::F4)?;
    let bytes = u.iter().flat_map(|x| x.to_le_bytes()).collect();
    let filter = lw.const_buf(bytes, DType::F32, u.len());
    lw.prog.steps.push(Step::Window(WindowCall {
        dims,
        x,
        op: WindowOp::WinogradFused {
            filter,
            bias: out.bias,
            cin,
            banded,
        },
        residual: out.residual,
        y: (out.y, [out.strides[0], out.strides[1], out.strides[2]]),
        activation: out.activation,
    }));
    Ok(())
}

/// Tile rows per band of a fused F(4×4) layer run band by band (`nnefc_winograd_banded`),
/// or `None` to keep the two calls: where the runtime's transforms read the input in
/// place, the products are fused ([`fused_pays`]) and the map has rows of 5 tiles or more
/// and at least two bands of [`BAND_TILE_ROWS`] (a 13×13 map's 16 tiles are one vector,
/// which bands would cut into rows of four).
fn band_rows(lw: &Lowering<'_>, kind: Tiles, ty: usize, tx: usize, cin: usize) -> Option<usize> {
    (lw.runtime_windows
        && kind == Tiles::F4
        && fused_pays(ty, tx, cin)
        && tx >= 5
        && ty >= 2 * BAND_TILE_ROWS)
        .then_some(BAND_TILE_ROWS)
}

/// Tile rows per band of a banded Winograd layer: two, which the products' vectors of
/// two rows of 5–7 tiles need (27×27 maps). On squeezenet1_1 (Zen 4, `nnefc bench -n
/// 400`, interleaved rounds) one row on 55×55 maps measured 5.75 ms on one thread against
/// 5.66 for two, and 5.05 against 5.08 on two threads with the cores far apart.
const BAND_TILE_ROWS: usize = 2;

/// Whether a conv of `cin → cout` channels on an `h × w` output takes F(4×4).
fn f4_pays(cin: usize, cout: usize, h: usize, w: usize) -> bool {
    let tiles = h.div_ceil(4) * w.div_ceil(4);
    let filter = (36 * 4 * cin).saturating_mul(cout);
    tiles >= MIN_TILES_F4 || (tiles >= MIN_TILES_F4_SMALL && filter <= SMALL_F4_FILTER)
}

/// `U[t][co][ci]` for the `tiles.planes()` positions `t = side·a + b`, packed per `t` for
/// the runtime GEMM.
fn transformed_filter(
    filter: &[f32],
    cout: usize,
    cin: usize,
    packing: APacking,
    tiles: Tiles,
) -> Result<Vec<f32>, CodegenError> {
    let u = transform_filter(filter, cout, cin, tiles)?;
    let plen = super::linalg::packed_len(packing, cout, cin);
    let mut packed = Vec::with_capacity(tiles.planes() * plen);
    for t in 0..tiles.planes() {
        let part = &u[t * cout * cin..(t + 1) * cout * cin];
        packed.extend(super::linalg::pack_const(packing, cout, cin, part, cin, 1)?);
    }
    Ok(packed)
}

/// `U[t][co][ci]` for the `tiles.planes()` positions `t = side·a + b`, element
/// `(t, co, ci)` at `(t·cout + co)·cin + ci`: the layout `nnefc_winograd_fused` reads.
fn transform_filter(
    filter: &[f32],
    cout: usize,
    cin: usize,
    tiles: Tiles,
) -> Result<Vec<f32>, CodegenError> {
    if filter.len() != cout * cin * 9 {
        return Err(CodegenError::Invalid("filter size for a 3×3 conv".into()));
    }
    let (g, side, planes) = (tiles.g(), tiles.side(), tiles.planes());
    let mut u = vec![0.0f32; planes * cout * cin];
    for co in 0..cout {
        for ci in 0..cin {
            let f = &filter[(co * cin + ci) * 9..][..9];
            // tmp = G g (side×3), then U = tmp Gᵀ (side×side); in f64, rounded once.
            let tmp: Vec<[f64; 3]> = g
                .iter()
                .map(|ga| {
                    core::array::from_fn(|j| (0..3).map(|i| ga[i] * f64::from(f[i * 3 + j])).sum())
                })
                .collect();
            for a in 0..side {
                for b in 0..side {
                    let v: f64 = (0..3).map(|j| tmp[a][j] * g[b][j]).sum();
                    u[((a * side + b) * cout + co) * cin + ci] = v as f32;
                }
            }
        }
    }
    Ok(u)
}

/// The input of [`conv3x3`].
pub(super) enum Input {
    /// A zero-padded view covering `2·ty + 2` rows and `2·tx + 2` columns from the
    /// top-left of the first window (the loop nests' input).
    Padded(View),
    /// The conv's input itself (unit column stride), with `pt` zero rows above and `pl`
    /// zero columns to the left, and zeros below and right as far as the tiles reach:
    /// the runtime's input transform reads it in place, with no padded copy.
    InPlace { view: View, pt: usize, pl: usize },
}

/// Emits the conv (see [`Input`] for its input).
pub(super) fn conv3x3(
    lw: &mut Lowering<'_>,
    input: Input,
    io: &ConvIo,
    filter: &[f32],
    fusion: Option<Fusion>,
) -> Result<(), CodegenError> {
    let (n, cin, cout) = (io.xs[0], io.xs[1], io.ys[1]);
    let (h, w) = (io.ys[2], io.ys[3]);
    // F(4×4) where the runtime's transforms read the input in place and the map gives
    // the products enough columns.
    let kind = if matches!(input, Input::InPlace { .. }) && f4_pays(cin, cout, h, w) {
        Tiles::F4
    } else {
        Tiles::F2
    };
    let (os, side, planes) = (kind.out(), kind.side(), kind.planes());
    let (ty, tx) = (h.div_ceil(os), w.div_ceil(os));
    let tiles = ty * tx;
    // Floats from one plane of V or M (one element and channel) to the next: padded by 16
    // for the runtime's transforms, which then store and load whole vectors where they
    // would mask partial ones (see `room` in the runtime's `winograd.rs`). resnet18, one
    // thread (Zen 5, `nnefc bench`, interleaved runs): 12.84–13.3 → 12.6–13.06 ms.
    // And odd: with a power-of-two channel count, an even plane could make the stride
    // between a tile's elements (`channels · tp` floats) a multiple of 4 KB, so that
    // the transforms' 36 (16) accesses per tile all fall in one set of the L1 cache.
    // A 64→256 conv on a 13×13 map through F(4×4) (16 tiles; Zen 5, one layer, `nnefc
    // bench --profile --per-step`): input transform 0.073 → 0.011 ms and output
    // transform 0.074 → 0.038 ms from 32-float planes to 33-float ones.
    let tp = if lw.runtime_windows {
        (tiles + 16) | 1
    } else {
        tiles
    };
    let f = DType::F32;
    let dims = [n, cout, h, w, ty, tx, side, side, os, os, 1, 1, 0, 0];
    if let (Some(band), Input::InPlace { view, pt, pl }) =
        (band_rows(lw, kind, ty, tx, cin), &input)
    {
        // Both transforms and the products band by band in each worker's scratch: no V in
        // the workspace (see the runtime's `winograd_banded.rs`).
        lw.gemm_scratch(nnefc_runtime::winograd_band_scratch_bytes(
            cin, tx, ty, band,
        ));
        let x = (
            view.buf,
            view.offset,
            [view.strides[0], view.strides[1], view.strides[2]],
        );
        let bands = WinogradBands {
            input: [io.xs[2], io.xs[3], *pt, *pl],
            band,
            scratch: 0,
        };
        return fused_call(lw, io, fusion.as_ref(), filter, dims, x, Some(bands));
    }
    // Input transform: V[n][t][ci][tile].
    let v = lw.scratch(f, n * planes * cin * tp);
    let vst = [planes * cin * tp, cin * tp, tp, tx, 1].map(|x| x as i64);
    // The view the runtime's transform reads, its extents and zero padding.
    let runtime_in = match &input {
        Input::InPlace { view, pt, pl } => Some((view, io.xs[2], io.xs[3], *pt, *pl)),
        Input::Padded(p) if lw.runtime_windows && p.strides[3] == 1 => {
            Some((p, 2 * ty + 2, 2 * tx + 2, 0, 0))
        }
        Input::Padded(_) => None,
    };
    match (runtime_in, &input) {
        (Some((p, ih, iw, pt, pl)), _) => {
            // One pass of the runtime's vector kernel over the input instead of sixteen
            // strided loop nests. resnet18's first 56×56 layer (Zen 5, one thread,
            // `nnefc bench --profile --per-step`): 16 × 0.016–0.018 ms → 0.185 ms (bound
            // by writing V, four times the input); the model 13.7–14.1 → 12.8–13.4 ms.
            // Reading the padding in the kernel also saves the padded copy and its four
            // border fills.
            lw.prog.steps.push(Step::Window(WindowCall {
                dims: [n, cin, ih, iw, ty, tx, side, side, os, os, 1, 1, pt, pl],
                x: (p.buf, p.offset, [p.strides[0], p.strides[1], p.strides[2]]),
                op: WindowOp::WinogradIn,
                residual: None,
                y: (v, [vst[0], vst[2], vst[3]]),
                activation: Activation::None,
            }));
        }
        (None, Input::Padded(p)) => input_loops(lw, p, v, &vst, [n, cin, ty, tx]),
        (None, Input::InPlace { .. }) => {
            return Err(CodegenError::Internal(
                "an unpadded Winograd input without the runtime's transform".into(),
            ));
        }
    }
    if kind == Tiles::F4 && fused_pays(ty, tx, cin) {
        // The products summed in registers and transformed at once: no plane of products
        // in memory (see the runtime's `winograd_fused.rs`).
        let x = (v, 0, [vst[0], vst[2], vst[3]]);
        return fused_call(lw, io, fusion.as_ref(), filter, dims, x, None);
    }
    let Outputs {
        y: ob,
        strides: ost,
        bias: (bb, bg),
        residual: rb,
        activation,
    } = outputs(lw, io, fusion.as_ref(), cout)?;
    // One GEMM per product and batch item: M[n][t][co][tile] = U_t · V[n][t].
    // The tap products are GEMMs like any other: lane panels where they pay (resnet18's
    // 7×7 maps give 16-column products, which the 6-row tiles run at half speed).
    let packing = super::linalg::a_packing(lw, cout, tiles, cin);
    let packed = transformed_filter(filter, cout, cin, packing, kind)?;
    let plen = super::linalg::packed_len(packing, cout, cin);
    let bytes = packed.iter().flat_map(|x| x.to_le_bytes()).collect();
    let abuf = lw.const_buf(bytes, f, packed.len());
    let m = lw.scratch(f, n * planes * cout * tp);
    let scratch = lw.gemm_scratch(super::linalg::scratch_bytes(packing, cout, tiles, cin));
    let mut batches = Vec::with_capacity(n * planes);
    for ni in 0..n {
        for t in 0..planes {
            batches.push([
                (t * plen) as i64,
                ((ni * planes + t) * cin * tp) as i64,
                ((ni * planes + t) * cout * tp) as i64,
            ]);
        }
    }
    lw.prog.steps.push(Step::Gemm(GemmCall {
        prefetch: None,
        m: cout,
        n: tiles,
        k: cin,
        a: Matrix {
            buf: abuf,
            rs: cin as i64,
            cs: 1,
        },
        a_packing: packing,
        b: Matrix {
            buf: v,
            rs: tp as i64,
            cs: 1,
        },
        c: Matrix {
            buf: m,
            rs: tp as i64,
            cs: 1,
        },
        batches,
        bias: None,
        scratch,
        epi: GemmEpi::default(),
    }));
    // Output transform: Y[n][co][2·y + i][2·x + j] for the (i, j) kernels.
    let mst = [planes * cout * tp, cout * tp, tp, tx, 1].map(|x| x as i64);
    if lw.runtime_windows {
        // One pass of the runtime's vector kernel: each product read once, the two output
        // columns of each tile interleaved into whole rows, instead of four loop nests
        // that read 9 of the 16 planes each and store every other element. Zen 5, one
        // thread (`nnefc bench`, interleaved runs): resnet18 12.85–13.1 → 12.5–12.7 ms,
        // squeezenet1_1 3.35–3.5 → 3.2–3.35.
        lw.prog.steps.push(Step::Window(WindowCall {
            dims: [n, cout, h, w, ty, tx, side, side, os, os, 1, 1, 0, 0],
            x: (m, 0, [mst[0], mst[2], mst[3]]),
            op: WindowOp::WinogradOut { bias: (bb, bg) },
            residual: rb,
            y: (ob, [ost[0], ost[1], ost[2]]),
            activation,
        }));
        return Ok(());
    }
    if kind != Tiles::F2 {
        return Err(CodegenError::Internal(
            "an F(4×4) Winograd conv without the runtime's transforms".into(),
        ));
    }
    for i in 0..2 {
        for j in 0..2 {
            // Outputs 2y + i < h, 2x + j < w.
            let (ey, ex) = ((h - i).div_ceil(2), (w - j).div_ceil(2));
            if ey == 0 || ex == 0 {
                continue;
            }
            let mut k = lw.kernel("wino_out", &[n, cout, ey, ex]);
            let ba = k.access(bb, 0, vec![0, bg, 0, 0]);
            let mut acc = k.load(ba, f);
            for a in 0..4 {
                for b in 0..4 {
                    let c = AT[i][a] * AT[j][b];
                    if c == 0.0 {
                        continue;
                    }
                    let ma = k.access(
                        m,
                        (4 * a + b) as i64 * mst[1],
                        vec![mst[0], mst[2], mst[3], mst[4]],
                    );
                    let x = k.load(ma, f);
                    let op = if c > 0.0 {
                        BinaryOp::Add
                    } else {
                        BinaryOp::Sub
                    };
                    acc = k.push(Expr::Binary(op, acc, x), f);
                }
            }
            let yoff = i as i64 * ost[2] + j as i64 * ost[3];
            let yst = vec![ost[0], ost[1], 2 * ost[2], 2 * ost[3]];
            if let Some(rb) = rb {
                let ra = k.access(rb, yoff, yst.clone());
                let r = k.load(ra, f);
                acc = k.push(Expr::Binary(BinaryOp::Add, acc, r), f);
            }
            activation.apply(acc, |e| k.push(e, f));
            k.set_store(ob, yoff, yst);
            lw.push(k);
        }
    }
    Ok(())
}

/// The input transform as 16 loop nests, one per element of `V` (each summing its 4
/// input values, strided by 2): targets without the runtime's window kernels, or a view
/// whose rows are not contiguous. `dims` is `[n, cin, ty, tx]`, `vst` the strides of `V`.
fn input_loops(lw: &mut Lowering<'_>, p: &View, v: BufId, vst: &[i64; 5], dims: [usize; 4]) {
    let f = DType::F32;
    for a in 0..4 {
        for b in 0..4 {
            let mut k = lw.kernel("wino_in", &dims);
            let mut acc: Option<ExprId> = None;
            for i in 0..4 {
                for j in 0..4 {
                    let c = BT[a][i] * BT[b][j];
                    if c == 0.0 {
                        continue;
                    }
                    let off = p.offset + i as i64 * p.strides[2] + j as i64 * p.strides[3];
                    let st = vec![
                        p.strides[0],
                        p.strides[1],
                        2 * p.strides[2],
                        2 * p.strides[3],
                    ];
                    let xa = k.access(p.buf, off, st);
                    let x = k.load(xa, f);
                    acc = Some(match (acc, c > 0.0) {
                        (None, true) => x,
                        (None, false) => k.push(Expr::Unary(UnaryOp::Neg, x), f),
                        (Some(s), true) => k.push(Expr::Binary(BinaryOp::Add, s, x), f),
                        (Some(s), false) => k.push(Expr::Binary(BinaryOp::Sub, s, x), f),
                    });
                }
            }
            k.set_store(
                v,
                (4 * a + b) as i64 * vst[1],
                vec![vst[0], vst[2], vst[3], vst[4]],
            );
            lw.push(k);
        }
    }
}
