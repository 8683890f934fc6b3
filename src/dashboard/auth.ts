/**
 * Dashboard auth: a bearer token or basic auth (any user name, the token as password). Two roles:
 * `admin` (FOXHUNT_DASHBOARD_TOKEN) may act on jobs; `viewer` (FOXHUNT_DASHBOARD_READONLY_TOKEN)
 * may only look. Auth is on by default; it may be off only on a loopback bind with an explicit
 * `--no-auth`, so the dashboard is never open to writes from the network.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { FoxhuntError } from '../errors.js';

export type Role = 'admin' | 'viewer';

export interface AuthOptions {
  /** false only with --no-auth on a loopback host */
  enabled: boolean;
  adminToken?: string | undefined;
  readonlyToken?: string | undefined;
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost', '::ffff:127.0.0.1']);

export function isLoopback(host: string): boolean {
  return LOOPBACK.has(host) || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/** Check the auth settings before binding; a wrong combination is a clear CONFIG_INVALID. */
export function resolveAuth(host: string, noAuth: boolean, env: NodeJS.ProcessEnv = process.env): AuthOptions {
  const adminToken = nonEmpty(env['FOXHUNT_DASHBOARD_TOKEN']);
  const readonlyToken = nonEmpty(env['FOXHUNT_DASHBOARD_READONLY_TOKEN']);
  if (noAuth) {
    if (!isLoopback(host)) {
      throw new FoxhuntError('CONFIG_INVALID', `--no-auth is only allowed when bound to localhost, not ${host}`, { where: '--host' });
    }
    return { enabled: false };
  }
  if (adminToken === undefined && readonlyToken === undefined) {
    throw new FoxhuntError('CONFIG_INVALID',
      'auth is on: set FOXHUNT_DASHBOARD_TOKEN (and optionally FOXHUNT_DASHBOARD_READONLY_TOKEN), or bind to 127.0.0.1 with --no-auth',
      { where: 'FOXHUNT_DASHBOARD_TOKEN' });
  }
  if (adminToken !== undefined && adminToken === readonlyToken) {
    throw new FoxhuntError('CONFIG_INVALID', 'the read-only token must differ from the admin token', { where: 'FOXHUNT_DASHBOARD_READONLY_TOKEN' });
  }
  return { enabled: true, adminToken, readonlyToken };
}

function nonEmpty(v: string | undefined): string | undefined {
  return v !== undefined && v.trim() !== '' ? v.trim() : undefined;
}

function same(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

/** The credential a request carries: a bearer token or a basic-auth password. */
export function credentialOf(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const [scheme, value] = header.trim().split(/\s+/, 2);
  if (value === undefined || scheme === undefined) return undefined;
  if (scheme.toLowerCase() === 'bearer') return value;
  if (scheme.toLowerCase() === 'basic') {
    const text = Buffer.from(value, 'base64').toString('utf8');
    const colon = text.indexOf(':');
    return colon >= 0 ? text.slice(colon + 1) : undefined;
  }
  return undefined;
}

/** The role of a request, or undefined when it is not authenticated. */
export function roleOf(auth: AuthOptions, header: string | undefined): Role | undefined {
  if (!auth.enabled) return 'admin';
  const cred = credentialOf(header);
  if (cred === undefined) return undefined;
  if (auth.adminToken !== undefined && same(cred, auth.adminToken)) return 'admin';
  if (auth.readonlyToken !== undefined && same(cred, auth.readonlyToken)) return 'viewer';
  return undefined;
}

/**
 * A browser replays basic-auth credentials on requests another site makes it send; a write that
 * a browser marks as cross-site (Sec-Fetch-Site, or an Origin that is not this host) is refused.
 */
export function crossSiteWrite(req: FastifyRequest): boolean {
  if (req.method === 'GET' || req.method === 'HEAD' || req.method === 'OPTIONS') return false;
  const site = req.headers['sec-fetch-site'];
  if (site === 'cross-site' || site === 'same-site') return true;
  const origin = req.headers.origin;
  if (origin === undefined || origin === 'null') return origin === 'null';
  try {
    return new URL(origin).host !== req.headers.host;
  } catch {
    return true;
  }
}

declare module 'fastify' {
  interface FastifyRequest {
    role?: Role;
  }
}

/**
 * onRequest hook: public paths pass; everything else needs a role; admin-only paths need admin.
 * Browsers get a basic-auth challenge, so a person can log in with the token as password.
 */
export function authHook(auth: AuthOptions, opts: { publicPaths: (path: string) => boolean; adminOnly: (path: string, method: string) => boolean }) {
  return async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const path = req.url.split('?', 1)[0] ?? '/';
    if (opts.publicPaths(path)) return;
    const role = roleOf(auth, req.headers.authorization);
    if (role === undefined) {
      await reply.code(401).header('www-authenticate', 'Basic realm="foxhunt", charset="UTF-8"')
        .send({ error: 'unauthorized', message: 'a bearer token or basic auth (token as password) is required' });
      return reply;
    }
    if (crossSiteWrite(req)) {
      await reply.code(403).send({ error: 'forbidden', message: 'cross-site requests may not change anything' });
      return reply;
    }
    if (role !== 'admin' && opts.adminOnly(path, req.method)) {
      await reply.code(403).send({ error: 'forbidden', message: 'the read-only role cannot change jobs' });
      return reply;
    }
    req.role = role;
  };
}
