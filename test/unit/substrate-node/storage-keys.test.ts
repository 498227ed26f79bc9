import assert from "node:assert/strict";
import { parseArgs } from "../../substrate-node/args";
import {
  decodeAccountIdVec,
  decodeCompact,
  decodeValidatorPrefs,
  encodeAccountIdVec,
  encodeCompact,
  encodeValidatorPrefs,
  fromHex,
  toHex,
} from "../../substrate-node/scale";
import {
  parseAccountId,
  SESSION_VALIDATORS_KEY,
  SYSTEM_NUMBER_KEY,
  sessionNextKeysKey,
  ss58Decode,
  ss58Encode,
  stakingValidatorsKey,
  storageValueKey,
  twox64,
  twox128,
} from "../../substrate-node/storage-keys";

const ALICE = "0xd43593c715fdd31c61141abd04a99fd6822c8558854ccde39a5684e7a56da27d";

describe("substrate test node: storage keys", () => {
  it("twox128 of pallet and item names matches real chain keys", () => {
    assert.equal(toHex(twox128("System")), "0x26aa394eea5630e07c48ae0c9558cef7");
    assert.equal(toHex(twox128("Staking")), "0x5f3e4907f716ac89b6347d15ececedca");
    assert.equal(toHex(twox128("Session")), "0xcec5070d609dd3497f72bde07fc96ba0");
    assert.equal(toHex(twox128("Validators")), "0x88dcde934c658227ee1dfafcd6e16903");
    assert.equal(SYSTEM_NUMBER_KEY, "0x26aa394eea5630e07c48ae0c9558cef702a5c1b19ab7a04f536c519aca4983ac");
    assert.equal(
      storageValueKey("System", "Account"),
      "0x26aa394eea5630e07c48ae0c9558cef7b99d880ec681799c0cf30e8886371da9",
    );
    assert.equal(
      SESSION_VALIDATORS_KEY,
      "0xcec5070d609dd3497f72bde07fc96ba088dcde934c658227ee1dfafcd6e16903",
    );
  });

  it("Twox64Concat map keys match real ones (Alice)", () => {
    const alice = fromHex(ALICE);
    assert.equal(toHex(twox64(alice)), "0x518366b5b1bc7c99");
    assert.equal(
      stakingValidatorsKey(alice),
      `0x5f3e4907f716ac89b6347d15ececedca88dcde934c658227ee1dfafcd6e16903518366b5b1bc7c99${ALICE.slice(2)}`,
    );
    // Session::NextKeys(Alice) as it appears in real chain specs' raw genesis.
    assert.equal(
      sessionNextKeysKey(alice),
      `0xcec5070d609dd3497f72bde07fc96ba04c014e6bf8b8c2c011e7290b85696bb3518366b5b1bc7c99${ALICE.slice(2)}`,
    );
  });

  it("SS58 encodes and decodes well-known addresses", () => {
    const alice = fromHex(ALICE);
    assert.equal(ss58Encode(alice), "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY");
    assert.equal(ss58Encode(alice, 0), "15oF4uVJwmo4TdGW7VfQxNLavjCXviqxT9S1MgbjMNHr6Sp5");
    assert.deepEqual(ss58Decode("5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"), {
      accountId: alice,
      prefix: 42,
    });
    const twoByte = ss58Encode(alice, 1284);
    assert.deepEqual(ss58Decode(twoByte), { accountId: alice, prefix: 1284 });
    assert.throws(() => ss58Decode("5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQZ"), /checksum/);
    assert.deepEqual(parseAccountId("15oF4uVJwmo4TdGW7VfQxNLavjCXviqxT9S1MgbjMNHr6Sp5"), alice);
    assert.deepEqual(parseAccountId(ALICE), alice);
    assert.throws(() => parseAccountId("0x1234"));
  });
});

describe("substrate test node: SCALE", () => {
  it("encodes compact integers in all four modes", () => {
    assert.equal(toHex(encodeCompact(0)), "0x00");
    assert.equal(toHex(encodeCompact(1)), "0x04");
    assert.equal(toHex(encodeCompact(63)), "0xfc");
    assert.equal(toHex(encodeCompact(64)), "0x0101");
    assert.equal(toHex(encodeCompact(16383)), "0xfdff");
    assert.equal(toHex(encodeCompact(16384)), "0x02000100");
    assert.equal(toHex(encodeCompact(1073741823)), "0xfeffffff");
    assert.equal(toHex(encodeCompact(1073741824)), "0x0300000040");
    assert.equal(toHex(encodeCompact(2n ** 64n - 1n)), "0x13ffffffffffffffff");
    for (const v of [0n, 1n, 63n, 64n, 16383n, 16384n, 1073741823n, 1073741824n, 2n ** 64n - 1n])
      assert.equal(decodeCompact(encodeCompact(v)).value, v);
  });

  it("encodes ValidatorPrefs { commission: Compact<Perbill>, blocked: bool }", () => {
    assert.equal(toHex(encodeValidatorPrefs({ commissionPerbill: 0, blocked: false })), "0x0000");
    // 10% = 100_000_000 parts per billion: four-byte compact mode.
    assert.equal(
      toHex(encodeValidatorPrefs({ commissionPerbill: 100_000_000, blocked: true })),
      "0x0284d71701",
    );
    assert.deepEqual(decodeValidatorPrefs(fromHex("0x0284d71701")), {
      commissionPerbill: 100_000_000,
      blocked: true,
    });
    assert.throws(() => encodeValidatorPrefs({ commissionPerbill: 1_000_000_001, blocked: false }));
  });

  it("encodes Vec<AccountId32>", () => {
    const a = fromHex(ALICE);
    const b = Buffer.alloc(32, 7);
    const enc = encodeAccountIdVec([a, b]);
    assert.equal(enc.length, 1 + 64);
    assert.equal(enc[0], 0x08);
    assert.deepEqual(decodeAccountIdVec(enc), [a, b]);
    assert.equal(toHex(encodeAccountIdVec([])), "0x00");
  });
});

describe("substrate test node: command line", () => {
  it("parses the real node's launch args and ignores the ones it does not model", () => {
    const p = parseArgs(
      [
        "--rpc-methods",
        "Unsafe",
        "--rpc-port=9950",
        "--chain",
        "kusama",
        "--base-path",
        "/tmp/x",
        "--port",
        "30333",
        "--validator",
        "--no-telemetry",
        "--block-time-ms",
        "250",
        "--whatever",
        "v",
      ],
      {},
    );
    assert.equal(p.port, 9950);
    assert.equal(p.options.rpcMethods, "Unsafe");
    assert.equal(p.options.chain, "kusama");
    assert.equal(p.options.basePath, "/tmp/x");
    assert.equal(p.options.validator, true);
    assert.equal(p.options.blockTimeMs, 250);
    assert.deepEqual(p.unknown, ["--whatever", "v"]);
    assert.equal(parseArgs(["--rpc-methods", "safe"], {}).options.rpcMethods, "Safe");
    assert.throws(() => parseArgs(["--rpc-methods", "maybe"], {}), /Safe, Unsafe or Auto/);
  });

  it("takes port and block time from the environment, flags winning", () => {
    const env = { SUBSTRATE_TEST_NODE_PORT: "9000", SUBSTRATE_TEST_NODE_BLOCK_TIME_MS: "100" };
    assert.equal(parseArgs([], env).port, 9000);
    assert.equal(parseArgs([], env).options.blockTimeMs, 100);
    assert.equal(parseArgs(["--rpc-port", "9001"], env).port, 9001);
    assert.equal(parseArgs([], {}).port, 9944);
  });
});
