/**
 * The email channel: SMTP through nodemailer's pooled transport (a few long-lived connections, many messages each).
 * Outcomes by the SMTP reply: 250 -> sent (the provider id is the server's "queued as" id, else the Message-ID);
 * a permanent 5xx (at RCPT TO: the mailbox does not exist) -> bounced, and the core disables email for the user;
 * a transient 4xx, a timeout or a refused connection -> retry. Each message carries X-Notification-Id and
 * X-Delivery-Id (the delivery's message_id) and a Message-ID derived from it, so a receiving side (and the
 * stand-in) can tie it to its delivery and spot a resend.
 */
import nodemailer, { type Transporter } from 'nodemailer';
import type SMTPPool from 'nodemailer/lib/smtp-pool/index.js';
import { hostPort } from '@raftkit/http';
import type { ChannelSender, OutboundMessage, SendOutcome, SenderContext } from './channel.js';
import { intSetting, providerWorker } from './settings.js';

export interface EmailSenderOptions {
  host: string;
  port: number;
  /** The From address. */
  from: string;
  ratePerSecond?: number;
  /** Pooled SMTP connections (each carries one message at a time). */
  connections?: number;
  maxBatch?: number;
  timeoutMs?: number;
}

const EMAIL = /^[^\s@<>]+@[^\s@<>]+\.[^\s@<>]+$/;

export class EmailSender implements ChannelSender {
  readonly channel = 'email' as const;
  readonly maxBatch: number;
  readonly ratePerSecond: number;
  private readonly transport: Transporter<SMTPPool.SentMessageInfo>;

  constructor(private readonly options: EmailSenderOptions) {
    this.maxBatch = options.maxBatch ?? 50;
    this.ratePerSecond = options.ratePerSecond ?? 1_000;
    const timeout = options.timeoutMs ?? 15_000;
    this.transport = nodemailer.createTransport({
      pool: true,
      host: options.host,
      port: options.port,
      secure: false,
      // The stand-in offers no TLS on loopback; a real relay would be configured with requireTLS instead.
      ignoreTLS: true,
      maxConnections: options.connections ?? 8,
      maxMessages: Infinity,
      connectionTimeout: timeout,
      greetingTimeout: timeout,
      socketTimeout: timeout,
    });
  }

  send(batch: readonly OutboundMessage[]): Promise<SendOutcome[]> {
    return Promise.all(batch.map((m) => this.sendOne(m)));
  }

  async sendOne(message: OutboundMessage): Promise<SendOutcome> {
    const address = message.address;
    if (address.channel !== 'email' || !EMAIL.test(address.email))
      return { kind: 'invalid_address', reason: 'not an email address' };
    try {
      const info = await this.transport.sendMail({
        from: this.options.from,
        to: address.email,
        subject: message.content.title,
        text: message.content.body,
        messageId: `<${message.message_id.replace(/[^A-Za-z0-9._-]/g, '.')}@notify.raftkit>`,
        headers: { 'X-Notification-Id': message.notification_id, 'X-Delivery-Id': message.message_id },
      });
      if (info.rejected.length > 0) return { kind: 'bounced', reason: `rejected: ${info.response}` };
      const queued = /queued as ([\w-]+)/i.exec(info.response);
      return { kind: 'sent', provider_message_id: queued?.[1] ?? info.messageId };
    } catch (e) {
      const err = e as Error & { responseCode?: number; command?: string };
      const code = err.responseCode;
      if (code !== undefined && code >= 500 && code <= 599)
        return { kind: 'bounced', reason: `${code} at ${err.command ?? 'SMTP'}: ${err.message}` };
      return {
        kind: 'retry',
        reason: code !== undefined ? `${code}: ${err.message}` : `SMTP unreachable: ${err.message}`,
      };
    }
  }

  async close(): Promise<void> {
    this.transport.close();
  }
}

/**
 * The cluster's email sender: SMTP at `--set email_smtp=host:port`, else the smtp-provider stand-in's SMTP
 * listener; `email_from` (notify@raftkit.test), `email_rate_per_second` (1000), `email_connections` (8).
 */
export async function createEmailSender(context: SenderContext): Promise<ChannelSender> {
  const address = context.settings.email_smtp ?? providerWorker(context, 'smtp-provider', 'email_smtp').tcpAddress;
  if (address === undefined) throw new Error('the smtp-provider worker has no SMTP listener');
  const [host, port] = hostPort(address);
  return new EmailSender({
    host,
    port,
    from: context.settings.email_from ?? 'notify@raftkit.test',
    ratePerSecond: intSetting(context, 'email_rate_per_second', 1_000),
    connections: intSetting(context, 'email_connections', 8),
  });
}
