import { createHash } from "node:crypto";
import { xxh64 } from "@node-rs/xxhash";
import { fromHex, toHex } from "./scale";

/**
 * Substrate storage-key derivation (FRAME `StorageValue` / `StorageMap` with the `Twox64Concat` hasher)
 * and SS58 addresses, as polkadot-sdk computes them:
 *
 *   value key = twox128(pallet) ++ twox128(item)
 *   map key   = twox128(pallet) ++ twox128(item) ++ twox64(k) ++ k        (Twox64Concat)
 *   twox128(x) = xxh64(x, seed 0) LE ++ xxh64(x, seed 1) LE;  twox64(x) = xxh64(x, seed 0) LE
 *
 * The node worker reads validator status from a chain with exactly these keys (and the Substrate test node
 * in test/ serves its storage under them).
 */

function u64le(v: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(v);
  return b;
}

function bytesOf(data: string | Uint8Array): Buffer {
  return typeof data === "string" ? Buffer.from(data, "utf8") : Buffer.from(data);
}

export function twox64(data: string | Uint8Array): Buffer {
  return u64le(xxh64(bytesOf(data), 0n));
}

export function twox128(data: string | Uint8Array): Buffer {
  const b = bytesOf(data);
  return Buffer.concat([u64le(xxh64(b, 0n)), u64le(xxh64(b, 1n))]);
}

export function twox64Concat(data: Uint8Array): Buffer {
  return Buffer.concat([twox64(data), Buffer.from(data)]);
}

/** Key of a `StorageValue`, as 0x-hex. */
export function storageValueKey(pallet: string, item: string): string {
  return toHex(Buffer.concat([twox128(pallet), twox128(item)]));
}

/** Key of one entry of a `Twox64Concat` `StorageMap`, as 0x-hex. */
export function storageMapKeyTwox64Concat(pallet: string, item: string, key: Uint8Array): string {
  return toHex(Buffer.concat([twox128(pallet), twox128(item), twox64Concat(key)]));
}

/** `System::Number`: the current block number (u32). */
export const SYSTEM_NUMBER_KEY = storageValueKey("System", "Number");
/** `Session::Validators`: `Vec<AccountId32>`, the active validator set of the current session. */
export const SESSION_VALIDATORS_KEY = storageValueKey("Session", "Validators");
/** Prefix of `Staking::Validators` (`Twox64Concat` map AccountId32 -> ValidatorPrefs): the candidates. */
export const STAKING_VALIDATORS_PREFIX = storageValueKey("Staking", "Validators");

/** `Staking::Validators(stash)`: present (ValidatorPrefs) when the stash has declared intent to validate. */
export function stakingValidatorsKey(accountId: Uint8Array): string {
  return storageMapKeyTwox64Concat("Staking", "Validators", accountId);
}

/** `Session::NextKeys(validatorId)`: the session keys a validator has registered on chain. */
export function sessionNextKeysKey(accountId: Uint8Array): string {
  return storageMapKeyTwox64Concat("Session", "NextKeys", accountId);
}

// ---------------------------------------------------------------------------------------------- SS58

const B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

export function base58Encode(bytes: Uint8Array): string {
  let n = 0n;
  for (const b of bytes) n = (n << 8n) | BigInt(b);
  let out = "";
  while (n > 0n) {
    out = B58[Number(n % 58n)] + out;
    n /= 58n;
  }
  for (const b of bytes) {
    if (b !== 0) break;
    out = `1${out}`;
  }
  return out;
}

export function base58Decode(s: string): Buffer {
  let n = 0n;
  for (const ch of s) {
    const i = B58.indexOf(ch);
    if (i < 0) throw new Error(`not base58: ${s}`);
    n = n * 58n + BigInt(i);
  }
  const bytes: number[] = [];
  while (n > 0n) {
    bytes.unshift(Number(n & 0xffn));
    n >>= 8n;
  }
  for (const ch of s) {
    if (ch !== "1") break;
    bytes.unshift(0);
  }
  return Buffer.from(bytes);
}

function ss58Checksum(payload: Uint8Array): Buffer {
  return createHash("blake2b512")
    .update(Buffer.concat([Buffer.from("SS58PRE"), payload]))
    .digest()
    .subarray(0, 2);
}

/** SS58 address of a 32-byte account id (`prefix` 0 = Polkadot, 2 = Kusama, 42 = generic Substrate). */
export function ss58Encode(accountId: Uint8Array, prefix = 42): string {
  if (accountId.length !== 32) throw new Error("AccountId32 must be 32 bytes");
  if (prefix < 0 || prefix > 16383 || prefix === 46 || prefix === 47)
    throw new Error(`bad ss58 prefix ${prefix}`);
  const head =
    prefix < 64
      ? Buffer.from([prefix])
      : Buffer.from([((prefix & 0b1111_1100) >> 2) | 0b0100_0000, (prefix >> 8) | ((prefix & 0b11) << 6)]);
  const payload = Buffer.concat([head, accountId]);
  return base58Encode(Buffer.concat([payload, ss58Checksum(payload)]));
}

/** Decodes an SS58 address of a 32-byte account; checks the checksum. */
export function ss58Decode(address: string): { accountId: Buffer; prefix: number } {
  const raw = base58Decode(address);
  const first = raw[0];
  if (first === undefined || first > 127) throw new Error(`bad ss58 address: ${address}`);
  const headLen = first < 64 ? 1 : 2;
  if (raw.length !== headLen + 32 + 2) throw new Error(`not an AccountId32 ss58 address: ${address}`);
  const prefix =
    headLen === 1 ? first : ((first & 0b0011_1111) << 2) | (raw[1]! >> 6) | ((raw[1]! & 0b0011_1111) << 8);
  const payload = raw.subarray(0, headLen + 32);
  if (!ss58Checksum(payload).equals(raw.subarray(headLen + 32)))
    throw new Error(`bad ss58 checksum: ${address}`);
  return { accountId: Buffer.from(raw.subarray(headLen, headLen + 32)), prefix };
}

/** Accepts a 0x-hex 32-byte account id or an SS58 address; returns the 32 bytes. */
export function parseAccountId(input: string | Uint8Array): Buffer {
  if (typeof input !== "string") {
    if (input.length !== 32) throw new Error("AccountId32 must be 32 bytes");
    return Buffer.from(input);
  }
  if (input.startsWith("0x")) {
    const b = fromHex(input);
    if (b.length !== 32) throw new Error(`AccountId32 must be 32 bytes: ${input}`);
    return b;
  }
  return ss58Decode(input).accountId;
}
