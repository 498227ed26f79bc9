/**
 * Keccak-256 (the original Keccak padding, as Ethereum uses it: not NIST SHA3-256, which node:crypto has):
 * an EVM transaction's hash is keccak256 of its signed raw bytes. Used off the hot path only (a broadcast
 * send that every node answered "already known", forward/pool-calls.ts), so it favours brevity: 64-bit lanes
 * as BigInt.
 */

const MASK = (1n << 64n) - 1n;
const RATE_BYTES = 136;

const ROUND_CONSTANTS: bigint[] = [];
{
  // The round constants from the LFSR of the Keccak reference (rc(t) over x^8 + x^6 + x^5 + x^4 + 1).
  let r = 1;
  for (let i = 0; i < 24; i++) {
    let c = 0n;
    for (let j = 0; j < 7; j++) {
      if (r & 1) c ^= 1n << BigInt((1 << j) - 1);
      r = (r << 1) ^ (r & 0x80 ? 0x71 : 0);
      r &= 0xff;
    }
    ROUND_CONSTANTS.push(c);
  }
}

/** Rotation offsets r[x + 5y] and the pi step's target lane for each lane. */
const ROTATIONS: number[] = new Array(25).fill(0);
const PI: number[] = new Array(25).fill(0);
{
  let x = 1;
  let y = 0;
  for (let t = 0; t < 24; t++) {
    ROTATIONS[x + 5 * y] = (((t + 1) * (t + 2)) / 2) % 64;
    const nx = y;
    const ny = (2 * x + 3 * y) % 5;
    x = nx;
    y = ny;
  }
  for (let i = 0; i < 5; i++) for (let j = 0; j < 5; j++) PI[i + 5 * j] = j + 5 * ((2 * i + 3 * j) % 5);
}

function rotl(v: bigint, n: number): bigint {
  if (n === 0) return v;
  const b = BigInt(n);
  return ((v << b) | (v >> (64n - b))) & MASK;
}

function permute(s: bigint[]): void {
  const c = new Array<bigint>(5);
  const b = new Array<bigint>(25);
  for (let round = 0; round < 24; round++) {
    for (let x = 0; x < 5; x++) c[x] = s[x]! ^ s[x + 5]! ^ s[x + 10]! ^ s[x + 15]! ^ s[x + 20]!;
    for (let x = 0; x < 5; x++) {
      const d = c[(x + 4) % 5]! ^ rotl(c[(x + 1) % 5]!, 1);
      for (let y = 0; y < 25; y += 5) s[x + y] = s[x + y]! ^ d;
    }
    for (let i = 0; i < 25; i++) b[PI[i]!] = rotl(s[i]!, ROTATIONS[i]!);
    for (let y = 0; y < 25; y += 5) {
      for (let x = 0; x < 5; x++)
        s[x + y] = b[x + y]! ^ (~b[((x + 1) % 5) + y]! & MASK & b[((x + 2) % 5) + y]!);
    }
    s[0] = s[0]! ^ ROUND_CONSTANTS[round]!;
  }
}

/** Keccak-256 of `data`, as 0x-prefixed lowercase hex. */
export function keccak256Hex(data: Uint8Array): string {
  const s = new Array<bigint>(25).fill(0n);
  const padded = new Uint8Array(Math.ceil((data.length + 1) / RATE_BYTES) * RATE_BYTES);
  padded.set(data);
  padded[data.length] = padded[data.length]! ^ 0x01;
  padded[padded.length - 1] = padded[padded.length - 1]! ^ 0x80;
  for (let off = 0; off < padded.length; off += RATE_BYTES) {
    for (let i = 0; i < RATE_BYTES / 8; i++) {
      let lane = 0n;
      for (let k = 7; k >= 0; k--) lane = (lane << 8n) | BigInt(padded[off + i * 8 + k]!);
      s[i] = s[i]! ^ lane;
    }
    permute(s);
  }
  let out = "0x";
  for (let i = 0; i < 4; i++) {
    let lane = s[i]!;
    for (let k = 0; k < 8; k++) {
      out += Number(lane & 0xffn)
        .toString(16)
        .padStart(2, "0");
      lane >>= 8n;
    }
  }
  return out;
}
