/**
 * `public/logs/live.log` as Taskcluster's workers keep it: while the run runs, a reference to where
 * its log grows (so readers and tools find it under the usual name); when the run ends, a link to
 * the complete log, uploaded as `public/logs/live_backing.log` (generic-worker's names). The queue
 * lets a reference become a link, never an s3 or object artifact, hence the second name.
 */
import type { ArtifactUploader } from './artifacts';
import { LIVE_BACKING_LOG_NAME, LIVE_LOG_NAME } from './payload';

/**
 * The log's type, for live.log in both its forms: a reference keeps its content type when it becomes
 * a link, and live.log is read as text for as long as the task lives. (While the run runs, the
 * reader it refers to answers JSON chunks ({text, next, state}): the queue has no plain-text reader.)
 */
export const LOG_CONTENT_TYPE = 'text/plain';

/** This queue's reader of a run's growing log (the `liveLog` method). */
export function liveLogReaderUrl(rootUrl: string, taskId: string, runId: number): string {
  return `${rootUrl.replace(/\/+$/, '')}/api/queue/v1/task/${encodeURIComponent(taskId)}/runs/${runId}/live-log`;
}

/** Points live.log at the run's growing log. Expires with the task: the link that replaces it may not expire sooner. */
export function referToLiveLog(uploader: ArtifactUploader, rootUrl: string, taskId: string, runId: number, expires: string): Promise<void> {
  return uploader.reference(LIVE_LOG_NAME, liveLogReaderUrl(rootUrl, taskId, runId), { contentType: LOG_CONTENT_TYPE, expires });
}

/** Uploads the complete log as live_backing.log, then makes live.log a link to it. */
export async function uploadFinalLog(uploader: ArtifactUploader, file: string, expires: string): Promise<void> {
  await uploader.uploadFile(LIVE_BACKING_LOG_NAME, file, { contentType: LOG_CONTENT_TYPE, expires });
  await uploader.link(LIVE_LOG_NAME, LIVE_BACKING_LOG_NAME, { contentType: LOG_CONTENT_TYPE, expires });
}
