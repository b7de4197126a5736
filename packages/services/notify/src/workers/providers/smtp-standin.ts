/**
 * The stand-in mail server (worker role `smtp-provider`): a real SMTP server (the `smtp-server` package) on the
 * worker's second listener, taking mail for any address, parsing each message (`mailparser`) and keeping it, read
 * back over the worker's HTTP API: GET /admin/received (cluster token).
 *
 * Hard bounces: RCPT TO an address whose domain is on the bounce list (bounce.test by default, `--set
 * smtp_bounce_domains=a.test,b.test`, or POST /admin/bounces {domains}) is answered `550 5.1.1`, a permanent
 * failure, as a receiving server answers for a mailbox that does not exist.
 * Faults (POST /admin/faults): SMTP's transient failure is a 4xx, not a 5xx (a 5xx is permanent, the sender must
 * not retry it), so `fail_next` answers MAIL FROM with `status` (default 451) and `slow_ms` delays the DATA answer.
 */
import { randomUUID } from 'node:crypto';
import { simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import {
  badRequest,
  requireObject,
  serveWorkerHttp,
  hostPort,
  type WorkerOptions,
  type WorkerRole,
} from '@raftkit/http';
import { Faults } from './faults.js';
import { ReceivedLog, type ReceivedBase } from './received.js';

export const SMTP_PROVIDER_ROLE = 'smtp-provider';
export const DEFAULT_BOUNCE_DOMAINS = ['bounce.test'];
const MAX_MESSAGE_BYTES = 1024 * 1024;

export interface ReceivedMail extends ReceivedBase {
  from: string;
  subject: string;
  text: string;
  /** The Message-ID header. */
  rfc822_message_id: string | null;
}

export const smtpProviderRole: WorkerRole = {
  role: SMTP_PROVIDER_ROLE,
  count: 1,
  async start(options: WorkerOptions) {
    const received = new ReceivedLog<ReceivedMail>();
    const faults = new Faults({ min: 421, max: 454, fallback: 451 });
    const bounceDomains = new Set(
      (options.settings.smtp_bounce_domains ?? DEFAULT_BOUNCE_DOMAINS.join(','))
        .split(',')
        .map((d) => d.trim().toLowerCase())
        .filter((d) => d.length > 0),
    );
    let bounced = 0;

    const smtp = new SMTPServer({
      secure: false,
      authOptional: true,
      disabledCommands: ['AUTH', 'STARTTLS'],
      banner: 'raftkit stand-in SMTP',
      size: MAX_MESSAGE_BYTES,
      logger: false,
      // A mail flood keeps many pooled connections open; the default (Infinity) is fine, but bound it sanely.
      maxClients: 1000,
      onMailFrom(_address, _session, callback) {
        const failure = faults.takeFailure();
        if (failure !== null)
          return callback(smtpError(failure, '4.3.0 temporary failure ordered through /admin/faults'));
        callback();
      },
      onRcptTo(address, _session, callback) {
        const domain = address.address.split('@').pop()?.toLowerCase() ?? '';
        if (bounceDomains.has(domain)) {
          bounced++;
          return callback(smtpError(550, `5.1.1 <${address.address}>: mailbox does not exist`));
        }
        callback();
      },
      onData(stream, session, callback) {
        simpleParser(stream, { skipHtmlToText: true, skipTextToHtml: true, skipImageLinks: true })
          .then(async (mail) => {
            await faults.delay();
            const id = randomUUID();
            const notificationId = mail.headers.get('x-notification-id');
            const deliveryId = mail.headers.get('x-delivery-id');
            const from = session.envelope.mailFrom === false ? '' : session.envelope.mailFrom.address;
            for (const rcpt of session.envelope.rcptTo) {
              received.add({
                id,
                message_id: typeof deliveryId === 'string' ? deliveryId : null,
                notification_id: typeof notificationId === 'string' ? notificationId : null,
                to: rcpt.address.toLowerCase(),
                from,
                subject: mail.subject ?? '',
                text: (mail.text ?? '').trimEnd(),
                rfc822_message_id: mail.messageId ?? null,
                received_at: Date.now(),
              });
            }
            callback(null, `2.0.0 queued as ${id}`);
          })
          .catch((e: unknown) => callback(smtpError(451, `4.6.0 cannot parse the message: ${(e as Error).message}`)));
      },
    });
    smtp.on('error', (e) => options.logger.log('warn', 'smtp error', { error: String(e) }));
    const [host, port] = hostPort(options.tcpAddress);
    await new Promise<void>((resolve, reject) => {
      smtp.once('error', reject);
      smtp.listen(port, host, () => {
        smtp.off('error', reject);
        resolve();
      });
    });

    const http = await serveWorkerHttp(options, {
      health: () => ({ smtp: options.tcpAddress, received: received.total, bounced }),
    });
    http.router
      .get('/admin/received', { admits: 'cluster' }, (ctx) => received.query(ctx.query))
      .get('/admin/counts', { admits: 'cluster' }, () => ({ total: received.total, bounced, ...received.counts() }))
      .post('/admin/faults', { admits: 'cluster' }, async (ctx) => faults.configure(requireObject(await ctx.json())))
      .get('/admin/faults', { admits: 'cluster' }, () => faults.view())
      .post('/admin/bounces', { admits: 'cluster' }, async (ctx) => {
        const body = requireObject(await ctx.json());
        const domains = body.domains;
        if (
          !Array.isArray(domains) ||
          domains.length > 1000 ||
          !domains.every((d): d is string => typeof d === 'string' && /^[A-Za-z0-9.-]{1,253}$/.test(d))
        ) {
          throw badRequest('invalid_field', 'domains must be an array of at most 1000 domain names', {
            field: 'domains',
          });
        }
        for (const d of domains) bounceDomains.add(d.toLowerCase());
        return { domains: [...bounceDomains] };
      });

    return {
      httpPort: http.port,
      async stop() {
        await new Promise<void>((resolve) => smtp.close(() => resolve()));
        await http.close();
      },
    };
  },
};

function smtpError(code: number, message: string): Error & { responseCode: number } {
  return Object.assign(new Error(message), { responseCode: code });
}
