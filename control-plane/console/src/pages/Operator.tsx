import { Link } from "../router";

/**
 * Operator console (issue 17 §1): shown only to platform operator accounts (`me { isOperator }`); the server
 * refuses every query here to anyone else, so hiding the pages is convenience, not the rule.
 */

export function OperatorNav() {
  return (
    <nav className="row wrap operator-nav" aria-label="Operator">
      <Link to="/operator/networks">Networks &amp; upstreams</Link>
      <Link to="/operator/plans">Plans</Link>
      <Link to="/operator/compute-units">Compute units</Link>
      <Link to="/operator/workspaces">Workspaces</Link>
      <Link to="/operator/usage">Platform usage</Link>
    </nav>
  );
}
