import { createContext, type ReactNode, useCallback, useContext, useEffect, useState } from "react";
import { getWorkspaceId, gql, setWorkspaceId, type WorkspaceRole, type WorkspaceSummary } from "./api";

export interface WorkspaceState {
  /** Every workspace the account belongs to, oldest membership first. */
  workspaces: WorkspaceSummary[];
  /** The one the pages work on: the switcher's choice, else the oldest. Null: the account has none. */
  current: WorkspaceSummary | null;
  /** The caller's role in a workspace it belongs to (an app's or node's page may be another's). */
  roleIn: (workspaceId: string) => WorkspaceRole | null;
  switchTo: (id: string) => void;
  /** Re-reads the list (after accepting an invitation, leaving, a role change); `select` switches too. */
  reload: (select?: string) => Promise<void>;
}

const Ctx = createContext<WorkspaceState | null>(null);

export function useWorkspace(): WorkspaceState {
  const ws = useContext(Ctx);
  if (!ws) throw new Error("useWorkspace outside WorkspaceProvider");
  return ws;
}

/** Loads the account's workspaces; `children` render once they are known (or the load failed). */
export function WorkspaceProvider({
  children,
  fallback,
}: {
  children: ReactNode;
  fallback: (error: unknown, retry: () => void) => ReactNode;
}) {
  const [list, setList] = useState<WorkspaceSummary[] | null>(null);
  const [selected, setSelected] = useState<string | null>(getWorkspaceId);
  const [error, setError] = useState<unknown>(null);

  const reload = useCallback(async (select?: string) => {
    try {
      const d = await gql<{ workspaces: WorkspaceSummary[] }>("{ workspaces { id name myRole } }");
      if (select) {
        setWorkspaceId(select);
        setSelected(select);
      }
      setList(d.workspaces);
      setError(null);
    } catch (err) {
      setError(err);
    }
  }, []);
  useEffect(() => {
    void reload();
  }, [reload]);

  if (list === null) return <>{fallback(error, () => void reload())}</>;
  const current = list.find((w) => w.id === selected) ?? list[0] ?? null;
  const value: WorkspaceState = {
    workspaces: list,
    current,
    roleIn: (id) => list.find((w) => w.id === id)?.myRole ?? null,
    switchTo: (id) => {
      setWorkspaceId(id);
      setSelected(id);
    },
    reload,
  };
  return <Ctx.Provider value={value}>{children}</Ctx.Provider>;
}
