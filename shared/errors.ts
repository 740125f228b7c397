/**
 * Typed errors that map to Taskcluster error codes at one edge (shared/api/respond.ts).
 */
export type ErrorCode =
  | 'MalformedPayload'
  | 'InvalidRequestArguments'
  | 'InputValidationError'
  | 'InputError'
  | 'AuthenticationFailed'
  | 'InsufficientScopes'
  | 'ResourceNotFound'
  | 'RequestConflict'
  | 'ResourceExpired'
  | 'InputTooLarge'
  | 'NoMatchingMethod'
  | 'InternalServerError';

export const STATUS_OF: Record<ErrorCode, number> = {
  MalformedPayload: 400,
  InvalidRequestArguments: 400,
  InputValidationError: 400,
  InputError: 400,
  AuthenticationFailed: 401,
  InsufficientScopes: 403,
  ResourceNotFound: 404,
  RequestConflict: 409,
  ResourceExpired: 410,
  InputTooLarge: 413,
  /** Object API: none of the caller's download methods is available (Taskcluster's 406). */
  NoMatchingMethod: 406,
  InternalServerError: 500,
};

export class ApiError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
  ) {
    super(message);
    this.name = code;
  }
  get status(): number {
    return STATUS_OF[this.code];
  }
}

export const notFound = (msg: string) => new ApiError('ResourceNotFound', msg);
export const conflict = (msg: string) => new ApiError('RequestConflict', msg);
export const inputError = (msg: string) => new ApiError('InputError', msg);
export const badArgs = (msg: string) => new ApiError('InvalidRequestArguments', msg);
/** A malformed URL parameter, in Taskcluster's words (clients show them). */
export const badUrlParam = (param: string, value: string, re: RegExp) =>
  badArgs(`Invalid URL patterns:\nURL parameter '${param}' given as '${value}' must match regular expression: '${re}'`);
/** A malformed query-string parameter, in Taskcluster's words. */
export const badQueryParam = (param: string, value: string, re: RegExp) =>
  badArgs(`Query-string parameter: ${param}="${value}" does not match expression: ${re}`);
export const authFailed = (msg: string) => new ApiError('AuthenticationFailed', msg);
