//! Measures whether fusing an inverted-residual chain (1×1 expand → depthwise 3×3 → 1×1
//! project, MobileNetV2's block) in row bands pays with the runtime's kernels: each stage
//! of mobilenet_v2 run layer by layer (the expanded map, up to 4.8 MB, goes to L3 and
//! back) against band by band (the expanded rows of one band of output rows, a few
//! hundred KB, stay in L2). The banded run computes every expanded row once: the rows two
//! bands share stay in the band buffer (moved to its top) instead of being recomputed.
//! Both runs call the same kernels on the same data and the program checks that they
//! give the same bits. Run with
//! `cargo run --release -p nnefc-runtime --example band_bench [rows per band] [cold]`
//! (`cold`: 32 MiB written elsewhere before every timed call).
//!
//! Not here: a fused kernel (this calls the runtime's GEMM and depthwise entry points per
//! band, as a compiler-level fusion would), residual adds, threads.

use nnefc_runtime::{
    DwArgs, GemmArgs, GemmEpilogue, nnefc_dwconv, nnefc_sgemm_parallel, pack_a, sgemm_scratch_bytes,
};
use std::time::Instant;

/// One inverted-residual stage: `cin → cin·t → cout` channels on an `h × h` input,
/// depthwise stride `s`.
struct Stage {
    cin: usize,
    mid: usize,
    cout: usize,
    h: usize,
    s: usize,
}

/// mobilenet_v2's stages on 224×224 inputs with distinct shapes (the repeats of a shape
/// behave alike).
const STAGES: [Stage; 7] = [
    Stage {
        cin: 16,
        mid: 96,
        cout: 24,
        h: 112,
        s: 2,
    },
    Stage {
        cin: 24,
        mid: 144,
        cout: 24,
        h: 56,
        s: 1,
    },
    Stage {
        cin: 24,
        mid: 144,
        cout: 32,
        h: 56,
        s: 2,
    },
    Stage {
        cin: 32,
        mid: 192,
        cout: 32,
        h: 28,
        s: 1,
    },
    Stage {
        cin: 64,
        mid: 384,
        cout: 64,
        h: 14,
        s: 1,
    },
    Stage {
        cin: 96,
        mid: 576,
        cout: 96,
        h: 14,
        s: 1,
    },
    Stage {
        cin: 160,
        mid: 960,
        cout: 160,
        h: 7,
        s: 1,
    },
];

/// A 64-byte-aligned scratch area for the GEMM.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; 64]);

/// The operands of one stage and both ways of running it.
struct Run<'a> {
    st: &'a Stage,
    x: Vec<f32>,
    expand: Vec<f32>,
    project: Vec<f32>,
    filter: Vec<f32>,
    bias: Vec<f32>,
    scratch: Vec<Line>,
}

impl Run<'_> {
    fn new(st: &Stage) -> Run<'_> {
        let val = |i: usize, m: usize| ((i * 7 % m) as f32 - (m / 2) as f32) * 0.05;
        let (x, we, wp) = (
            (0..st.cin * st.h * st.h).map(|i| val(i, 13)).collect(),
            (0..st.mid * st.cin).map(|i| val(i, 11)).collect::<Vec<_>>(),
            (0..st.cout * st.mid).map(|i| val(i, 7)).collect::<Vec<_>>(),
        );
        let gemm_bytes = sgemm_scratch_bytes(st.mid, st.h * st.h, st.cin).max(sgemm_scratch_bytes(
            st.cout,
            st.h * st.h,
            st.mid,
        ));
        Run {
            st,
            x,
            expand: pack_a(st.mid, st.cin, &we, st.cin, 1),
            project: pack_a(st.cout, st.mid, &wp, st.mid, 1),
            filter: (0..st.mid * 9).map(|i| val(i, 5)).collect(),
            bias: (0..st.mid.max(st.cout)).map(|i| val(i, 3)).collect(),
            scratch: vec![Line([0; 64]); gemm_bytes.div_ceil(64)],
        }
    }

    /// `c = relu6(a·b + bias)`, `a` packed `m × k`, `b` `k × n` with row stride `rsb`.
    #[allow(clippy::too_many_arguments)]
    fn gemm(
        &mut self,
        m: usize,
        n: usize,
        k: usize,
        project: bool,
        b: *const f32,
        rsb: usize,
        c: *mut f32,
        rsc: usize,
    ) {
        let epi = GemmEpilogue {
            bias: self.bias.as_ptr(),
            bias_kind: 1,
            activation: 2,
            lo: 0.0,
            hi: 6.0,
            accumulate: 0,
        };
        let a = if project { &self.project } else { &self.expand };
        let g = GemmArgs {
            m,
            n,
            k,
            a: a.as_ptr(),
            rsa: 0,
            csa: 0,
            a_packed: 1,
            b,
            rsb: rsb as isize,
            csb: 1,
            c,
            rsc: rsc as isize,
            epilogue: &epi,
        };
        // SAFETY: the operands have the extents `g` states; the scratch is large enough
        // for both products of the stage.
        unsafe { nnefc_sgemm_parallel(&g, core::ptr::null(), self.scratch.as_mut_ptr().cast(), 0) }
    }

    /// The depthwise conv of `rows` input rows at `x` (channel stride `x_sc`) with `pt`
    /// zero rows above, into `out_rows` output rows at `y` (channel stride `y_sc`).
    #[allow(clippy::too_many_arguments)]
    fn dw(
        &self,
        x: *const f32,
        rows: usize,
        x_sc: usize,
        pt: usize,
        out_rows: usize,
        y: *mut f32,
        y_sc: usize,
    ) {
        let (h, oh) = (self.st.h, self.st.h / self.st.s);
        let a = DwArgs {
            n: 1,
            c: self.st.mid,
            h: rows,
            w: h,
            oh: out_rows,
            ow: oh,
            kh: 3,
            kw: 3,
            sh: self.st.s,
            sw: self.st.s,
            dh: 1,
            dw: 1,
            pt,
            pl: 1,
            x,
            x_sn: 0,
            x_sc: x_sc as isize,
            x_sh: h as isize,
            filter: self.filter.as_ptr(),
            bias: self.bias.as_ptr(),
            bias_sc: 1,
            res: core::ptr::null(),
            y,
            y_sn: 0,
            y_sc: y_sc as isize,
            y_sh: oh as isize,
            act: 2,
            lo: 0.0,
            hi: 6.0,
        };
        // SAFETY: `x` holds `rows` rows of every channel, `y` `out_rows`; they are the
        // buffers `layers` and `banded` allocate for these extents.
        unsafe { nnefc_dwconv(&a, core::ptr::null()) }
    }

    /// Layer by layer: the whole expanded and depthwise maps in memory.
    fn layers(&mut self, e: &mut [f32], d: &mut [f32], y: &mut [f32]) {
        let (st, hw) = (self.st, self.st.h * self.st.h);
        let ohw = (st.h / st.s) * (st.h / st.s);
        let x = self.x.as_ptr();
        self.gemm(st.mid, hw, st.cin, false, x, hw, e.as_mut_ptr(), hw);
        self.dw(e.as_ptr(), st.h, hw, 1, st.h / st.s, d.as_mut_ptr(), ohw);
        self.gemm(
            st.cout,
            ohw,
            st.mid,
            true,
            d.as_ptr(),
            ohw,
            y.as_mut_ptr(),
            ohw,
        );
    }

    /// Band by band: `band` output rows at a time, through buffers of one band.
    fn banded(&mut self, band: usize, e: &mut [f32], d: &mut [f32], y: &mut [f32]) {
        let st = self.st;
        let (h, s, oh) = (st.h, st.s, st.h / st.s);
        let mut held: Option<(usize, usize)> = None;
        let mut o0 = 0;
        while o0 < oh {
            let o1 = (o0 + band).min(oh);
            // Input rows the band's windows read: [r0, r1).
            let (r0, r1) = ((o0 * s).saturating_sub(1), ((o1 - 1) * s + 2).min(h));
            let rows = r1 - r0;
            let mut first_new = r0;
            if let Some((p0, p1)) = held.filter(|&(_, p1)| p1 > r0) {
                // Rows [r0, p1) were expanded for the previous band: move them to the
                // top of each channel's rows (in the order that does not overwrite a
                // channel not yet moved).
                let (keep, prev) = (p1 - r0, p1 - p0);
                let order: Vec<usize> = if rows >= prev {
                    (0..st.mid).rev().collect()
                } else {
                    (0..st.mid).collect()
                };
                for c in order {
                    let from = c * prev * h + (r0 - p0) * h;
                    e.copy_within(from..from + keep * h, c * rows * h);
                }
                first_new = p1;
            }
            let (xb, eb) = (
                self.x[first_new * h..].as_ptr(),
                e[(first_new - r0) * h..].as_mut_ptr(),
            );
            self.gemm(
                st.mid,
                (r1 - first_new) * h,
                st.cin,
                false,
                xb,
                h * h,
                eb,
                rows * h,
            );
            held = Some((r0, r1));
            let pt = usize::from(o0 == 0);
            self.dw(
                e.as_ptr(),
                rows,
                rows * h,
                pt,
                o1 - o0,
                d.as_mut_ptr(),
                (o1 - o0) * oh,
            );
            let yb = y[o0 * oh..].as_mut_ptr();
            self.gemm(
                st.cout,
                (o1 - o0) * oh,
                st.mid,
                true,
                d.as_ptr(),
                (o1 - o0) * oh,
                yb,
                oh * oh,
            );
            o0 = o1;
        }
    }
}

/// Best time in µs of `f` over 5 batches of `reps` calls; with `cold`, each call comes
/// after writing 32 MiB elsewhere (untimed), as in a network whose other layers and
/// weights have gone through the caches since.
fn best(reps: usize, cold: &mut Option<Vec<f32>>, mut f: impl FnMut()) -> f64 {
    if let Some(junk) = cold {
        let mut total = f64::MAX;
        for _ in 0..5 {
            let mut sum = 0.0;
            for _ in 0..reps.min(20) {
                for x in junk.iter_mut() {
                    *x += 1.0;
                }
                let t = Instant::now();
                f();
                sum += t.elapsed().as_secs_f64();
            }
            total = total.min(sum / reps.min(20) as f64 * 1e6);
        }
        return total;
    }
    (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                f();
            }
            t.elapsed().as_secs_f64() / reps as f64 * 1e6
        })
        .fold(f64::MAX, f64::min)
}

fn main() {
    let band: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(8);
    let mut cold =
        (std::env::args().nth(2).as_deref() == Some("cold")).then(|| vec![0f32; 8 << 20]);
    println!(
        "stage                       layer by layer (µs)  in bands of {band} rows (µs)  change"
    );
    for st in &STAGES {
        let mut run = Run::new(st);
        let (oh, rows_in) = (st.h / st.s, (band - 1) * st.s + 3);
        let mut e = vec![0f32; st.mid * st.h * st.h];
        let mut d = vec![0f32; st.mid * oh * oh];
        let mut y = vec![0f32; st.cout * oh * oh];
        let mut eb = vec![0f32; st.mid * rows_in.min(st.h) * st.h];
        let mut db = vec![0f32; st.mid * band.min(oh) * oh];
        let mut yb = vec![0f32; st.cout * oh * oh];
        run.layers(&mut e, &mut d, &mut y);
        run.banded(band, &mut eb, &mut db, &mut yb);
        let same = y.iter().zip(&yb).all(|(a, b)| a.to_bits() == b.to_bits());
        let reps = (3e7 / (st.mid * st.h * st.h) as f64).max(20.0) as usize;
        // Interleaved, three times each, so that a slow phase of the machine hits both.
        let (mut tl, mut tb) = (f64::MAX, f64::MAX);
        for _ in 0..3 {
            tl = tl.min(best(reps, &mut cold, || run.layers(&mut e, &mut d, &mut y)));
            tb = tb.min(best(reps, &mut cold, || {
                run.banded(band, &mut eb, &mut db, &mut yb)
            }));
        }
        println!(
            "{:>3}→{:>3}→{:>3} at {:>3}², stride {}  {tl:>18.1}  {tb:>24.1}  {:+6.1} %{}",
            st.cin,
            st.mid,
            st.cout,
            st.h,
            st.s,
            (tb / tl - 1.0) * 100.0,
            if same { "" } else { "  (BITS DIFFER)" }
        );
    }
}
