/** The stand-in providers (worker roles started by `cluster up --service notify`) and what tests need of them. */
import type { WorkerRole } from '@raftkit/http';
import { pushProviderRole } from './push-standin.js';
import { smsProviderRole } from './sms-standin.js';
import { smtpProviderRole } from './smtp-standin.js';

export { pushProviderRole, PUSH_PROVIDER_ROLE, type ReceivedPush } from './push-standin.js';
export { smsProviderRole, SMS_PROVIDER_ROLE, UNREACHABLE_PREFIX, type ReceivedSms } from './sms-standin.js';
export { smtpProviderRole, SMTP_PROVIDER_ROLE, DEFAULT_BOUNCE_DOMAINS, type ReceivedMail } from './smtp-standin.js';
export { createSubscriberKeys, decryptAes128gcm, verifyVapid, type SubscriberKeys } from './webpush-crypto.js';
export type { FaultState } from './faults.js';
export type { ReceivedBase } from './received.js';

/** The three stand-ins, in start order (before the channel workers that send to them). */
export const providerRoles: readonly WorkerRole[] = [smtpProviderRole, pushProviderRole, smsProviderRole];
