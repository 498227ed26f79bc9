import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { keccak256 } from "ethers";
import { keccak256Hex } from "../../../../data-plane/src/rpc/keccak256";

describe("keccak256Hex", () => {
  it("matches the published vectors (empty input, 'abc')", () => {
    assert.equal(
      keccak256Hex(new Uint8Array()),
      "0xc5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470",
    );
    assert.equal(
      keccak256Hex(Buffer.from("abc")),
      "0x4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45",
    );
  });

  it("matches ethers' keccak256 across the rate boundary and on random inputs", () => {
    for (const n of [1, 55, 135, 136, 137, 271, 272, 273, 1000]) {
      const data = randomBytes(n);
      assert.equal(keccak256Hex(data), keccak256(data), `length ${n}`);
    }
  });
});
