// The SIMT emulator's warp collectives: sync_warp, shuffles, votes, and the tensor-core
// instructions mma.m16n8k16 (bf16) and ldmatrix. Each is a rendezvous of the lanes named in its
// mask; the last lane to arrive computes every participant's result (emulator.hpp).
#include <algorithm>
#include <bit>
#include <cstring>

#include "cuda/simt/block.hpp"
#include "tensor/error.hpp"

namespace simt {
inline namespace emulated {
namespace detail {

const char* op_name(WarpOp op) {
  switch (op) {
    case WarpOp::sync_warp: return "sync_warp";
    case WarpOp::shfl_idx: return "shfl";
    case WarpOp::shfl_up: return "shfl_up";
    case WarpOp::shfl_down: return "shfl_down";
    case WarpOp::shfl_xor: return "shfl_xor";
    case WarpOp::ballot: return "ballot";
    case WarpOp::vote_any: return "any";
    case WarpOp::vote_all: return "all";
    case WarpOp::mma_m16n8k16_bf16: return "mma_m16n8k16_bf16";
    case WarpOp::ldmatrix_x1: return "ldmatrix_x1";
    case WarpOp::ldmatrix_x2: return "ldmatrix_x2";
    case WarpOp::ldmatrix_x4: return "ldmatrix_x4";
    case WarpOp::ldmatrix_x1_trans: return "ldmatrix_x1_trans";
    case WarpOp::ldmatrix_x2_trans: return "ldmatrix_x2_trans";
    case WarpOp::ldmatrix_x4_trans: return "ldmatrix_x4_trans";
  }
  return "?";
}

namespace {

bool is_shuffle(WarpOp op) {
  return op == WarpOp::shfl_idx || op == WarpOp::shfl_up || op == WarpOp::shfl_down ||
         op == WarpOp::shfl_xor;
}

// mma and ldmatrix are .aligned: every lane of the warp executes them.
bool needs_full_warp(WarpOp op) { return op >= WarpOp::mma_m16n8k16_bf16; }

// The source lane of a shuffle, following the PTX ISA's shfl.sync pseudocode: CUDA passes
// c = ((32 - width) << 8) | clamp, where the segment mask (32 - width) keeps the lane within
// its width-aligned segment and clamp is the segment's last lane (its first for shfl.up).
// A source outside the segment means "keep your own value".
unsigned shuffle_source(WarpOp op, unsigned lane, unsigned arg, unsigned width) {
  const unsigned segmask = (32u - width) & 31u;
  const unsigned b = arg & 31u;
  const unsigned min_lane = lane & segmask;
  const unsigned max_lane = op == WarpOp::shfl_up ? min_lane : min_lane | (31u & ~segmask);
  int j = int(lane);
  bool valid = false;
  switch (op) {
    case WarpOp::shfl_up: j = int(lane) - int(b); valid = j >= int(max_lane); break;
    case WarpOp::shfl_down: j = int(lane + b); valid = j <= int(max_lane); break;
    case WarpOp::shfl_xor: j = int(lane ^ b); valid = j <= int(max_lane); break;
    default: j = int(min_lane | (b & ~segmask)); valid = j <= int(max_lane); break;
  }
  return valid ? unsigned(j) : lane;
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, PTX ISA "Matrix Fragments for
// mma.m16n8k16 with floating point type". With groupID = lane >> 2 and
// threadID_in_group = lane % 4 (g, t below), each lane holds
//   A (16x16, row): a0..a7 in 4 registers, 2 per register (lower index in bits 0-15):
//       row = g for a0,a1,a4,a5 and g + 8 for a2,a3,a6,a7;
//       col = 2t + (i & 1) for a0..a3 and 2t + (i & 1) + 8 for a4..a7
//   B (16x8, col): b0..b3 in 2 registers: row (k) = 2t + (i & 1) (+ 8 for b2,b3), col (n) = g
//   C, D (16x8 f32): c0..c3: row = g (c0,c1) or g + 8 (c2,c3), col = 2t + (i & 1)
// LaneIO::in holds a[4], b[2], c[4]. Products of bf16 are exact; the emulator sums them in
// double and rounds once, the tensor core's result up to its fp32 accumulation order.
void mma_m16n8k16(LaneIO* const lanes[32]) {
  float a[16][16], b[16][8], c[16][8];
  for (unsigned lane = 0; lane < 32; ++lane) {
    const unsigned g = lane >> 2, t = lane & 3;
    const uint32_t* in = lanes[lane]->in;
    for (unsigned r = 0; r < 4; ++r) {
      const unsigned row = g + 8 * (r & 1), col = 2 * t + 8 * (r >> 1);
      a[row][col] = bf16_lo(in[r]);
      a[row][col + 1] = bf16_hi(in[r]);
    }
    for (unsigned r = 0; r < 2; ++r) {
      const unsigned k = 2 * t + 8 * r;
      b[k][g] = bf16_lo(in[4 + r]);
      b[k + 1][g] = bf16_hi(in[4 + r]);
    }
    for (unsigned i = 0; i < 4; ++i) c[g + 8 * (i >> 1)][2 * t + (i & 1)] = bits_float(in[6 + i]);
  }
  for (unsigned lane = 0; lane < 32; ++lane) {
    const unsigned g = lane >> 2, t = lane & 3;
    for (unsigned i = 0; i < 4; ++i) {
      const unsigned m = g + 8 * (i >> 1), n = 2 * t + (i & 1);
      double sum = c[m][n];
      for (unsigned k = 0; k < 16; ++k) sum += double(a[m][k]) * double(b[k][n]);
      lanes[lane]->out[i] = float_bits(float(sum));
    }
  }
}

// ldmatrix.sync.aligned.m8n8.{x1,x2,x4}[.trans].shared.b16, PTX ISA "Warp-level matrix load
// instruction: ldmatrix". Matrix q (0 .. count-1) is 8 rows of 8 b16; lane 8q + r supplies the
// address of its row r (16 contiguous, 16-byte aligned bytes of shared memory); other lanes'
// addresses are ignored. Lane l receives in register q the elements (l / 4, 2 (l % 4) + {0, 1})
// of matrix q, lower column in bits 0-15; with .trans, elements (2 (l % 4) + {0, 1}, l / 4).
void ldmatrix(Block& b, LaneIO* const lanes[32], unsigned count, bool trans, WarpOp op) {
  uint16_t m[4][8][8];
  for (unsigned q = 0; q < count; ++q) {
    for (unsigned r = 0; r < 8; ++r) {
      const void* row = lanes[8 * q + r]->ptr;
      if (reinterpret_cast<uintptr_t>(row) % 16 != 0 || !b.in_shared(row, 16))
        b.fail_thread(cotan::cat(op_name(op), " in ", b.where(), ": lane ", 8 * q + r,
                                 " gives the row address ", row,
                                 ", which is not 16 bytes of shared memory aligned to 16"));
      std::memcpy(m[q][r], row, 16);
    }
  }
  for (unsigned lane = 0; lane < 32; ++lane) {
    const unsigned g = lane >> 2, t = lane & 3;
    for (unsigned q = 0; q < count; ++q) {
      const uint16_t lo = trans ? m[q][2 * t][g] : m[q][g][2 * t];
      const uint16_t hi = trans ? m[q][2 * t + 1][g] : m[q][g][2 * t + 1];
      lanes[lane]->out[q] = uint32_t(lo) | (uint32_t(hi) << 16);
    }
  }
}

// Computes the results of the collective `op` of the lanes in `group` (all of which arrived).
void complete(Block& b, WarpOp op, unsigned warp, unsigned group) {
  LaneIO* lanes[32] = {};
  for (unsigned lane = 0; lane < 32; ++lane)
    if (group >> lane & 1) lanes[lane] = b.threads[warp * 32 + lane].io;

  unsigned votes = 0;
  for (unsigned lane = 0; lane < 32; ++lane)
    if (lanes[lane] != nullptr && lanes[lane]->in[0] != 0) votes |= 1u << lane;

  switch (op) {
    case WarpOp::sync_warp: break;
    case WarpOp::ballot:
    case WarpOp::vote_any:
    case WarpOp::vote_all:
      for (LaneIO* io : lanes) {
        if (io == nullptr) continue;
        io->out[0] = op == WarpOp::ballot ? votes
                     : op == WarpOp::vote_any ? unsigned(votes != 0)
                                              : unsigned(votes == group);
      }
      break;
    case WarpOp::mma_m16n8k16_bf16: mma_m16n8k16(lanes); break;
    case WarpOp::ldmatrix_x1: ldmatrix(b, lanes, 1, false, op); break;
    case WarpOp::ldmatrix_x2: ldmatrix(b, lanes, 2, false, op); break;
    case WarpOp::ldmatrix_x4: ldmatrix(b, lanes, 4, false, op); break;
    case WarpOp::ldmatrix_x1_trans: ldmatrix(b, lanes, 1, true, op); break;
    case WarpOp::ldmatrix_x2_trans: ldmatrix(b, lanes, 2, true, op); break;
    case WarpOp::ldmatrix_x4_trans: ldmatrix(b, lanes, 4, true, op); break;
    default:  // shuffles
      for (unsigned lane = 0; lane < 32; ++lane) {
        LaneIO* io = lanes[lane];
        if (io == nullptr) continue;
        const unsigned src = shuffle_source(op, lane, unsigned(io->arg), unsigned(io->width));
        if (lanes[src] != nullptr) {
          std::memcpy(io->out, lanes[src]->in, 8);
        } else if (b.options->poison_shared) {
          std::memset(io->out, 0xff, 8);  // undefined on a GPU: the source lane is not in the mask
        } else {
          std::memcpy(io->out, io->in, 8);
        }
      }
      break;
  }
}

}  // namespace

void warp_collective(WarpOp op, unsigned mask, LaneIO& io) {
  ThreadState& t = current_state(op_name(op));
  Block& b = *t.block;
  const unsigned lane = t.linear % 32, warp = t.linear / 32;
  const unsigned present = b.present_lanes(warp);
  const auto here = [&] {
    return cotan::cat(op_name(op), " in ", b.where(), ", thread ", str(t.thread_idx), " (warp ",
                      warp, ", lane ", lane, ")");
  };
  if (!(mask >> lane & 1))
    b.fail_thread(cotan::cat(here(), ": the mask ", hex(mask), " does not name the calling lane"));
  if (is_shuffle(op) && (io.width < 1 || io.width > 32 || (io.width & (io.width - 1)) != 0))
    b.fail_thread(cotan::cat(here(), ": width ", io.width, " is not a power of two from 1 to 32"));
  if (needs_full_warp(op) && present != 0xffffffffu)
    b.fail_thread(cotan::cat(here(), ": needs all 32 lanes of the warp, the block has ",
                             std::popcount(present), " in this warp"));

  t.wait = Wait::warp;
  t.op = op;
  t.mask = mask;
  t.io = &io;
  // Join the lanes waiting at the same collective with the same mask. Lanes waiting at another
  // collective that names this lane, while this lane's mask names them, wait for each other
  // forever: a mismatch. (Only one side naming the other is a lane that has not arrived yet:
  // half a warp may finish its own collective and then join the other half at a full-warp one.)
  const unsigned group = mask & present;
  std::vector<PendingCollective>& pending = b.pending[warp];
  PendingCollective* mine = nullptr;
  for (PendingCollective& p : pending) {
    if (p.op == op && p.mask == mask && p.width == io.width) {
      mine = &p;
    } else if ((p.arrived & group) != 0 && (p.mask >> lane & 1) != 0) {
      const unsigned j = unsigned(std::countr_zero(p.arrived & group));
      b.fail_thread(cotan::cat("warp collective mismatch: ", here(), " with mask ", hex(mask),
                               (is_shuffle(op) ? cotan::cat(" width ", io.width) : ""),
                               ", while lane ", j, " waits at ", op_name(p.op), " with mask ",
                               hex(p.mask),
                               (is_shuffle(p.op) ? cotan::cat(" width ", p.width) : "")));
    }
  }
  if (mine == nullptr) mine = &pending.emplace_back(PendingCollective{op, mask, io.width, 0});
  mine->arrived |= 1u << lane;
  if (mine->arrived == group) {
    *mine = pending.back();
    pending.pop_back();
    complete(b, op, warp, group);
    b.release_lanes(warp, group);
  }
  b.yield(t);
}

}  // namespace detail
}  // namespace emulated
}  // namespace simt
