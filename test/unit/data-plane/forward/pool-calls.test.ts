import assert from "node:assert/strict";
import { Transaction, Wallet } from "ethers";
import { extrinsicHash, rawTxHash } from "../../../../data-plane/src/forward/pool-calls";

describe("pool calls: a raw transaction's hash", () => {
  const wallet = new Wallet("0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d");

  it("is the hash ethers gives the signed transaction (legacy, EIP-1559, with calldata)", async () => {
    const raws = [
      await wallet.signTransaction({
        type: 0,
        chainId: 31337,
        nonce: 3,
        to: wallet.address,
        gasLimit: 21_000,
        gasPrice: 1n,
      }),
      await wallet.signTransaction({
        type: 2,
        chainId: 1,
        nonce: 0,
        to: null,
        data: `0x${"60".repeat(300)}`,
        gasLimit: 1_000_000,
        maxFeePerGas: 10n ** 10n,
        maxPriorityFeePerGas: 1n,
      }),
    ];
    for (const raw of raws) assert.equal(rawTxHash(raw), Transaction.from(raw).hash);
  });

  it("is undefined for what is not hex bytes (odd length, no 0x, not a string)", () => {
    for (const bad of ["0x0", "ab", "0xzz", 12, null, undefined, {}, `0x${"00".repeat(300 * 1024)}`]) {
      assert.equal(rawTxHash(bad), undefined, String(bad).slice(0, 10));
    }
  });

  it("extrinsicHash is the 32-byte BLAKE2b of the bytes (published vectors), undefined for what is not hex bytes", () => {
    assert.equal(
      extrinsicHash(`0x${Buffer.from("abc").toString("hex")}`),
      "0xbddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319",
    );
    for (const bad of ["0x", "0x0", "ab", 12, null]) assert.equal(extrinsicHash(bad), undefined, String(bad));
  });
});
