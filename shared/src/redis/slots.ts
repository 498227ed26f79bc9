/**
 * Redis Cluster slots: which of the 16384 slots a key lives in. A key whose name holds a non-empty
 * `{…}` (the first `{` and the first `}` after it) is hashed on that hash tag only, so keys sharing a tag
 * share a slot; a MULTI, a Lua script or a multi-key command must touch one slot, or Redis Cluster refuses
 * it with CROSSSLOT.
 */

export const CLUSTER_SLOTS = 16384;

// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the checksum Redis Cluster hashes keys with.
const CRC16_TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i << 8;
    for (let b = 0; b < 8; b++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
    t[i] = c;
  }
  return t;
})();

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ byte) & 0xff]!;
  return crc;
}

/** The part of `key` Redis Cluster hashes: the hash tag when there is a non-empty one, else the key. */
export function hashTagOf(key: string): string {
  const open = key.indexOf("{");
  if (open < 0) return key;
  const close = key.indexOf("}", open + 1);
  if (close <= open + 1) return key;
  return key.slice(open + 1, close);
}

/** Slot (0..16383) of a key, as `CLUSTER KEYSLOT` computes it (on the UTF-8 bytes). */
export function keySlot(key: string): number {
  return crc16(Buffer.from(hashTagOf(key), "utf8")) % CLUSTER_SLOTS;
}
