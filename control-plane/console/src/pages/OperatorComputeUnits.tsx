import { type FormEvent, useState } from "react";
import { gql } from "../api";
import { Async, FormError, TextInput, useQuery } from "../ui";
import { OperatorNav } from "./Operator";

/**
 * Operator: method weights in compute units (docs/compute-units.md). The platform table, or one network's
 * resolved weights with its overrides marked; set a weight (`*` = the default weight), or remove an
 * override / platform entry. Each change republishes the networks to the data planes.
 */

interface MethodCosts {
  networkSlug: string | null;
  defaultUnits: number;
  defaultSource: "PLATFORM" | "NETWORK";
  methods: { method: string; units: number; source: "PLATFORM" | "NETWORK" }[];
}

const COSTS_FIELDS = "networkSlug defaultUnits defaultSource methods { method units source }";

export function OperatorComputeUnitsPage() {
  const nets = useQuery(
    () => gql<{ networks: { slug: string; name: string }[] }>("{ networks { slug name } }"),
    [],
  );
  const [scope, setScope] = useState("");
  const q = useQuery(
    () =>
      gql<{ methodCosts: MethodCosts }>(
        `query($n: String) { methodCosts(networkSlug: $n) { ${COSTS_FIELDS} } }`,
        {
          n: scope === "" ? null : scope,
        },
      ),
    [scope],
  );
  const [error, setError] = useState<unknown>(null);
  const remove = async (method: string) => {
    setError(null);
    try {
      await gql(
        "mutation($n: String, $m: String!) { removeMethodCost(networkSlug: $n, method: $m) { defaultUnits } }",
        {
          n: scope === "" ? null : scope,
          m: method,
        },
      );
      q.reload();
    } catch (err) {
      setError(err);
    }
  };
  const own = scope === "" ? "PLATFORM" : "NETWORK";
  return (
    <section>
      <h1>Compute units</h1>
      <OperatorNav />
      <div className="card">
        <label>
          Weights of{" "}
          <select aria-label="Weights of" value={scope} onChange={(e) => setScope(e.target.value)}>
            <option value="">the platform (default table)</option>
            {(nets.data?.networks ?? []).map((n) => (
              <option key={n.slug} value={n.slug}>
                {n.name} ({n.slug})
              </option>
            ))}
          </select>
        </label>
        <p className="muted">
          Each request object costs its method's weight; a network's own entries override the platform's.
        </p>
      </div>
      <Async q={q}>
        {({ methodCosts: c }) => (
          <div className="card">
            <p data-testid="default-units">
              Any other method: <strong>{c.defaultUnits}</strong> compute units
              {c.networkSlug !== null && c.defaultSource === "NETWORK" ? " (this network's)" : ""}
            </p>
            <div className="table-wrap">
              <table aria-label="Method weights">
                <thead>
                  <tr>
                    <th>Method</th>
                    <th>Compute units</th>
                    <th>From</th>
                    <th />
                  </tr>
                </thead>
                <tbody>
                  {c.methods.map((m) => (
                    <tr key={m.method} data-method={m.method}>
                      <td>
                        <code>{m.method}</code>
                      </td>
                      <td data-testid="units">{m.units}</td>
                      <td>{m.source === "NETWORK" ? "this network" : "platform"}</td>
                      <td className="actions">
                        {m.source === own && (
                          <button type="button" className="secondary" onClick={() => void remove(m.method)}>
                            {own === "NETWORK" ? "Remove override" : "Remove"}
                          </button>
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
            <FormError error={error} fields={[]} />
          </div>
        )}
      </Async>
      <SetWeight networkSlug={scope === "" ? null : scope} onSaved={q.reload} />
    </section>
  );
}

function SetWeight({ networkSlug, onSaved }: { networkSlug: string | null; onSaved: () => void }) {
  const [method, setMethod] = useState("");
  const [units, setUnits] = useState("");
  const [error, setError] = useState<unknown>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    try {
      await gql(
        "mutation($n: String, $m: String!, $u: Int!) { setMethodCost(networkSlug: $n, method: $m, units: $u) { defaultUnits } }",
        {
          n: networkSlug,
          m: method.trim(),
          u: Number(units),
        },
      );
      setMethod("");
      setUnits("");
      onSaved();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <form className="card" onSubmit={submit} aria-label="Set a weight">
      <h2>{networkSlug === null ? "Set a platform weight" : `Set a weight for ${networkSlug}`}</h2>
      <div className="row wrap">
        <TextInput
          label="Method"
          placeholder="eth_call, or * for the default"
          value={method}
          onChange={setMethod}
        />
        <TextInput label="Compute units" placeholder="0..1000000" value={units} onChange={setUnits} />
        <button type="submit">Save weight</button>
      </div>
      <FormError error={error} fields={[]} />
    </form>
  );
}
