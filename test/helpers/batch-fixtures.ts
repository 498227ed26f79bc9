/** JSON-RPC batch texts for the batch parser's tests (test/unit/data-plane/rpc). */

/** One element, compact as clients write it. */
export const el = (id: string, method = "eth_getBalance", more = ',"params":["0xab","latest"]') =>
  `{"jsonrpc":"2.0","id":${id},"method":"${method}"${more}}`;

/** Batches that exercise every branch of the scan, valid and not. */
export const BATCHES = [
  `[${el("1")},${el("2")}]`,
  `[${el("1")},${el('"x"')},${el("null")},{"jsonrpc":"2.0","method":"n"}]`,
  ` [ ${el("0")} , 5, "s", null, [], {} ] `,
  `[${el("1e3")},${el("1.0")},${el("-0")},${el("1.50")},${el("-7")},${el("99999999999999999999")}]`,
  `[${el("9007199254740993")},${el("123456789012345")},${el("1234567890123456")},${el("1E400")}]`,
  `[${el("true")},${el("false")},${el("{}")},${el("[1]")}]`,
  '[{"jsonrpc":"2.0","id":1,"method":"a","method":"b","params":[1],"params":{"x":[2]}}]',
  '[{"jsonrpc":"2.0","id":1,"method":"a","params":{"x":[2]},"params":[ "0x1" , {"b":"]"}, 7 ,"0x9"]}]',
  '[{"jsonrpc":"2.0","id":1,"method":"a","params":["latest","latest\\n","0x2"]}]',
  '[{"id":1,"jsonrpc":"2.0","jsonrpc":"1.0","method":"a"},{"id":2,"id":"z","jsonrpc":"2.0","method":"a"}]',
  '[{"jsonrpc":"2.0","id":1,"m\\u0065thod":"a"},{"jsonrpc":"2\\u002e0","id":2,"method":"b"}]',
  '[{"jsonrpc":"2.0","id":"a\\"b","method":"e\\u0074h_x"},{"jsonrpc":"2.0","id":"\\u0061","method":"x"}]',
  '[{"jsonrpc":"2.0","id":1,"method":""},{"jsonrpc":"2.0","id":1,"method":5},{"jsonrpc":2,"id":1,"method":"a"}]',
  '[{"jsonrpc":"2.0","id":1,"method":"a","params":null},{"jsonrpc":"2.0","id":2,"method":"a","params":"x"}]',
  '[{"jsonrpc":"2.0","id":1,"method":"a","params":3},{"jsonrpc":"2.0","id":2,"method":"a","params":true}]',
  '[{"jsonrpc":"2.0","id":1,"method":"__proto__","params":{"__proto__":{"a":1}},"__proto__":null}]',
  '[{"jsonrpc":"2.0","id":1,"method":"a","params":[{"id":9,"method":"b","jsonrpc":"1"}],"x":{"params":0}}]',
  '[{"jsonrpc":"2.0","id":1,"method":"é"},{"jsonrpc":"2.0","id":"😀","method":"a"}]',
  '[{"jsonrpc":"2.0","id":1,"method":"a","params":["\\ud800"]}]',
  "[]",
  " [ ] ",
  "[] x",
  "[,]",
  `[${el("1")},]`,
  `[${el("1")}`,
  `[${el("1")}]]`,
  `[${Array(100).fill(el("1")).join(",")}]`,
  `[${Array(101).fill(el("1")).join(",")}]`,
  `[${Array(101).fill(el("1")).join(",")},]`,
  `[${Array(150).fill("1").join(",")}]`,
];
