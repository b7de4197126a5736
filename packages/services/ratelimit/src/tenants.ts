/**
 * Tenant keys. Each registered service_id gets two bearer tokens derived from the cluster token with the shared
 * HMAC scheme of @raftkit/http (`client.admin.<id>.<mac>` and `client.check.<id>.<mac>`), so every member and
 * every check instance verifies them without shared state. The principal's name says which tenant and which key.
 */
import { deriveClientToken, HttpError, type Principal } from '@raftkit/http';

export interface TenantKeys {
  adminKey: string;
  checkKey: string;
}

export function tenantKeys(clusterToken: string, serviceId: string): TenantKeys {
  return {
    adminKey: deriveClientToken(clusterToken, `admin.${serviceId}`),
    checkKey: deriveClientToken(clusterToken, `check.${serviceId}`),
  };
}

/** What a principal may do: everything (the cluster token), or one tenant's rules and/or checks. */
export type Access = { kind: 'cluster' } | { kind: 'admin' | 'check'; serviceId: string } | { kind: 'none' };

/** A binary-protocol connection keeps one Principal for all its checks: parse its name once. */
const parsed = new WeakMap<Principal, Access>();

export function accessOf(principal: Principal): Access {
  let access = parsed.get(principal);
  if (access === undefined) {
    const m = principal.kind === 'cluster' ? null : /^(admin|check)\.(.+)$/.exec(principal.name);
    access =
      principal.kind === 'cluster'
        ? { kind: 'cluster' }
        : m === null
          ? { kind: 'none' }
          : { kind: m[1] as 'admin' | 'check', serviceId: m[2]! };
    parsed.set(principal, access);
  }
  return access;
}

/**
 * Refuse (403) unless `principal` may manage (`admin`) or check against (`check`) `serviceId`. A tenant admin key
 * may also check its own tenant; a check key can never manage rules.
 */
export function requireTenantAccess(principal: Principal, serviceId: string, need: 'admin' | 'check'): void {
  const access = accessOf(principal);
  if (access.kind === 'cluster') return;
  if (access.kind !== 'none' && access.serviceId === serviceId && (access.kind === 'admin' || need === 'check')) return;
  throw new HttpError(
    403,
    'forbidden',
    need === 'admin'
      ? `this token may not manage the rules of ${serviceId}`
      : `this token may not check against ${serviceId}`,
    { service_id: serviceId },
  );
}

/** The tenant a principal is confined to, or null for the cluster token. 403 for tokens that are no tenant's. */
export function tenantOf(principal: Principal, need: 'admin' | 'check'): string | null {
  const access = accessOf(principal);
  if (access.kind === 'cluster') return null;
  if (access.kind === 'none' || (need === 'admin' && access.kind !== 'admin')) {
    throw new HttpError(
      403,
      'forbidden',
      need === 'admin'
        ? 'rules are managed with the cluster token or a tenant admin key'
        : 'checks need the cluster token or a tenant key',
    );
  }
  return access.serviceId;
}
