import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { blake2bHex } from "../../../../data-plane/src/rpc/blake2b";

describe("blake2bHex", () => {
  it("gives the published 32-byte digests (empty input, 'abc')", () => {
    assert.equal(
      blake2bHex(new Uint8Array(), 32),
      "0x0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8",
    );
    assert.equal(
      blake2bHex(Buffer.from("abc"), 32),
      "0xbddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319",
    );
  });

  it("matches node:crypto's blake2b512 across block boundaries and on random inputs", () => {
    for (const n of [0, 1, 3, 127, 128, 129, 255, 256, 257, 1000]) {
      const data = randomBytes(n);
      assert.equal(
        blake2bHex(data, 64),
        `0x${createHash("blake2b512").update(data).digest("hex")}`,
        `length ${n}`,
      );
    }
  });
});
