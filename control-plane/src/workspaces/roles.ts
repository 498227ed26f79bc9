import { registerEnumType } from "type-graphql";

/**
 * A member's role in one workspace. Every workspace has exactly one OWNER (a partial unique index holds
 * "at most one"; the member rules keep "at least one": the owner can neither leave nor be demoted or
 * removed, only hand the role over with `transferOwnership`).
 */
export enum WorkspaceRole {
  OWNER = "OWNER",
  ADMIN = "ADMIN",
  MEMBER = "MEMBER",
  VIEWER = "VIEWER",
}
registerEnumType(WorkspaceRole, {
  name: "WorkspaceRole",
  description: "A member's role in a workspace (docs/teams.md).",
});

/** Higher outranks lower: members are managed only by someone of a higher rank. */
export const ROLE_RANK: Readonly<Record<WorkspaceRole, number>> = {
  [WorkspaceRole.OWNER]: 3,
  [WorkspaceRole.ADMIN]: 2,
  [WorkspaceRole.MEMBER]: 1,
  [WorkspaceRole.VIEWER]: 0,
};

/** Roles, highest first. */
export const ROLES: readonly WorkspaceRole[] = [
  WorkspaceRole.OWNER,
  WorkspaceRole.ADMIN,
  WorkspaceRole.MEMBER,
  WorkspaceRole.VIEWER,
];

/** What a caller asks to do in a workspace; every workspace-scoped service call names one. */
export enum Permission {
  Read = "READ",
  ReadKeys = "READ_KEYS",
  CreateApps = "CREATE_APPS",
  ManageApps = "MANAGE_APPS",
  ManageKeys = "MANAGE_KEYS",
  ManageAccessRules = "MANAGE_ACCESS_RULES",
  ManageNodes = "MANAGE_NODES",
  ManageWebhooks = "MANAGE_WEBHOOKS",
  ManageMembers = "MANAGE_MEMBERS",
  ManagePlan = "MANAGE_PLAN",
  ReadBilling = "READ_BILLING",
  TransferOwnership = "TRANSFER_OWNERSHIP",
  Leave = "LEAVE",
}

interface RoleRule {
  permission: Permission;
  /** Shown in the role table of docs/teams.md and in FORBIDDEN messages ("A VIEWER of this workspace may not ..."). */
  what: string;
  roles: readonly WorkspaceRole[];
}

const { OWNER, ADMIN, MEMBER, VIEWER } = WorkspaceRole;

/**
 * THE role table: what each role may do in its workspace. The services ask `can` before every
 * workspace-scoped read or write; docs/teams.md prints this table (`roleTableMarkdown`, checked by
 * test/unit/control-plane/workspaces/roles.test.ts). The platform operator (ADMIN_TOKEN) may do all of it.
 */
export const ROLE_TABLE: readonly RoleRule[] = [
  {
    permission: Permission.Read,
    what: "see the workspace, its apps, endpoints, allowlists, dedicated nodes, usage, members and webhooks",
    roles: [OWNER, ADMIN, MEMBER, VIEWER],
  },
  {
    permission: Permission.ReadKeys,
    what: "see API keys and dedicated-node keys in clear (a VIEWER gets them masked)",
    roles: [OWNER, ADMIN, MEMBER],
  },
  { permission: Permission.CreateApps, what: "create apps", roles: [OWNER, ADMIN, MEMBER] },
  { permission: Permission.ManageApps, what: "rename, reconfigure or delete apps", roles: [OWNER, ADMIN] },
  { permission: Permission.ManageKeys, what: "regenerate API keys", roles: [OWNER, ADMIN] },
  {
    permission: Permission.ManageAccessRules,
    what: "edit allowlists, access rules (methods, caps, user agents) and JWT keys",
    roles: [OWNER, ADMIN],
  },
  {
    permission: Permission.ManageNodes,
    what: "deploy, change, restart, stop or delete dedicated nodes, regenerate their keys, set a validator stash",
    roles: [OWNER, ADMIN],
  },
  {
    permission: Permission.ManageWebhooks,
    what: "add, change, test or delete webhook endpoints and rotate their signing secrets",
    roles: [OWNER, ADMIN],
  },
  {
    permission: Permission.ManageMembers,
    what: "invite members, list and revoke invitations, change roles and remove members, for roles below their own",
    roles: [OWNER, ADMIN],
  },
  { permission: Permission.ManagePlan, what: "change the plan", roles: [OWNER] },
  {
    permission: Permission.ReadBilling,
    what: "read and download monthly usage statements (billing)",
    roles: [OWNER, ADMIN],
  },
  { permission: Permission.TransferOwnership, what: "transfer ownership", roles: [OWNER] },
  {
    permission: Permission.Leave,
    what: "leave the workspace (the owner transfers ownership first)",
    roles: [ADMIN, MEMBER, VIEWER],
  },
];

const BY_PERMISSION = new Map(ROLE_TABLE.map((r) => [r.permission, r]));

export function can(role: WorkspaceRole, permission: Permission): boolean {
  return BY_PERMISSION.get(permission)?.roles.includes(role) ?? false;
}

export function describePermission(permission: Permission): string {
  return BY_PERMISSION.get(permission)?.what ?? permission;
}

/** `a` may manage a member holding (or being given) role `b`: only strictly lower roles. */
export function outranks(a: WorkspaceRole, b: WorkspaceRole): boolean {
  return ROLE_RANK[a] > ROLE_RANK[b];
}

/** "An OWNER", "A MEMBER": for messages. */
export function roleArticle(role: WorkspaceRole): string {
  return `${/^[AEIOU]/.test(role) ? "An" : "A"} ${role}`;
}

/** The role table as docs/teams.md prints it. */
export function roleTableMarkdown(): string {
  const header = `| may … | ${ROLES.join(" | ")} |`;
  const rule = `| --- | ${ROLES.map(() => ":---:").join(" | ")} |`;
  const rows = ROLE_TABLE.map(
    (r) => `| ${r.what} | ${ROLES.map((role) => (r.roles.includes(role) ? "yes" : "–")).join(" | ")} |`,
  );
  return [header, rule, ...rows].join("\n");
}

/**
 * A key as a VIEWER sees it: the first and last 4 characters around asterisks. `*` never occurs in a
 * base64url key, so a masked key can never be a valid one, and it needs no escaping inside a URL.
 */
export function maskKey(key: string): string {
  return key.length <= 8 ? "********" : `${key.slice(0, 4)}${"*".repeat(8)}${key.slice(-4)}`;
}
