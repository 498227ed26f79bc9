/**
 * The few pieces of SCALE (Substrate's binary codec) the test node needs: compact integers, bool, u32/u64
 * little-endian and Vec<AccountId32>. Encodings follow the parity-scale-codec spec byte for byte, so a real
 * client (polkadot-js, subxt, a worker's own decoder) reads what this node writes.
 */

export function toHex(bytes: Uint8Array): string {
  return `0x${Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex")}`;
}

/** `0x`-prefixed (or bare) even-length hex to bytes; throws on anything else. */
export function fromHex(hex: string): Buffer {
  const body = hex.startsWith("0x") || hex.startsWith("0X") ? hex.slice(2) : hex;
  if (body.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(body)) throw new Error(`not hex: ${hex}`);
  return Buffer.from(body, "hex");
}

/** SCALE `Compact<uN>`: single-byte, two-byte, four-byte and big-integer modes. */
export function encodeCompact(value: number | bigint): Buffer {
  const v = BigInt(value);
  if (v < 0n) throw new Error("compact: negative");
  if (v < 1n << 6n) return Buffer.from([Number(v << 2n)]);
  if (v < 1n << 14n) {
    const b = Buffer.alloc(2);
    b.writeUInt16LE(Number((v << 2n) | 1n));
    return b;
  }
  if (v < 1n << 30n) {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(Number((v << 2n) | 2n));
    return b;
  }
  const bytes: number[] = [];
  let rest = v;
  while (rest > 0n) {
    bytes.push(Number(rest & 0xffn));
    rest >>= 8n;
  }
  if (bytes.length > 67) throw new Error("compact: too large");
  return Buffer.from([((bytes.length - 4) << 2) | 3, ...bytes]);
}

/** Decodes a `Compact<uN>` at `offset`; returns the value and how many bytes it took. */
export function decodeCompact(bytes: Uint8Array, offset = 0): { value: bigint; length: number } {
  const first = bytes[offset];
  if (first === undefined) throw new Error("compact: out of data");
  switch (first & 3) {
    case 0:
      return { value: BigInt(first >> 2), length: 1 };
    case 1:
      return { value: BigInt(Buffer.from(bytes).readUInt16LE(offset) >> 2), length: 2 };
    case 2:
      return { value: BigInt(Buffer.from(bytes).readUInt32LE(offset) >>> 2), length: 4 };
    default: {
      const n = (first >> 2) + 4;
      if (offset + 1 + n > bytes.length) throw new Error("compact: out of data");
      let v = 0n;
      for (let i = n - 1; i >= 0; i--) v = (v << 8n) | BigInt(bytes[offset + 1 + i]!);
      return { value: v, length: 1 + n };
    }
  }
}

export function encodeBool(v: boolean): Buffer {
  return Buffer.from([v ? 1 : 0]);
}

export function encodeU32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v >>> 0);
  return b;
}

export function encodeU64(v: number | bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(v));
  return b;
}

/** `Perbill` is parts per billion (0..1_000_000_000): 10% commission = 100_000_000. */
export const PERBILL = 1_000_000_000;

/** `pallet_staking::ValidatorPrefs { commission: Compact<Perbill>, blocked: bool }`. */
export function encodeValidatorPrefs(prefs: { commissionPerbill: number; blocked: boolean }): Buffer {
  if (
    !Number.isInteger(prefs.commissionPerbill) ||
    prefs.commissionPerbill < 0 ||
    prefs.commissionPerbill > PERBILL
  )
    throw new Error(`commission out of range: ${prefs.commissionPerbill}`);
  return Buffer.concat([encodeCompact(prefs.commissionPerbill), encodeBool(prefs.blocked)]);
}

export function decodeValidatorPrefs(bytes: Uint8Array): { commissionPerbill: number; blocked: boolean } {
  const c = decodeCompact(bytes, 0);
  const blocked = bytes[c.length];
  if (blocked !== 0 && blocked !== 1) throw new Error("ValidatorPrefs: bad bool");
  return { commissionPerbill: Number(c.value), blocked: blocked === 1 };
}

/** `Vec<AccountId32>`: compact length then 32 bytes each. */
export function encodeAccountIdVec(accounts: Uint8Array[]): Buffer {
  for (const a of accounts) if (a.length !== 32) throw new Error("AccountId32 must be 32 bytes");
  return Buffer.concat([encodeCompact(accounts.length), ...accounts]);
}

export function decodeAccountIdVec(bytes: Uint8Array): Buffer[] {
  const { value, length } = decodeCompact(bytes, 0);
  const n = Number(value);
  if (length + n * 32 !== bytes.length) throw new Error("Vec<AccountId32>: length mismatch");
  const out: Buffer[] = [];
  for (let i = 0; i < n; i++) out.push(Buffer.from(bytes.subarray(length + i * 32, length + (i + 1) * 32)));
  return out;
}
