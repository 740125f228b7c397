// Parameters for infra/main.bicep. Deploy with:
//   az deployment group create -g <rg> -f infra/main.bicep -p infra/main.bicepparam
// Secrets are read from the environment of the machine running the deployment, never written here:
//   QUEUE_ROOT_ACCESS_TOKEN     root client access token (>= 22 characters)
//   QUEUE_TOKEN_ENCRYPTION_KEY  `openssl rand -base64 32`; keep it: changing it orphans stored client tokens
//   QUEUE_ADMIN_PRINCIPAL_ID    optional: your object id, to read/rotate the secrets
// Checked: `using` + readEnvironmentVariable(name[, default]) is the .bicepparam form seen in public
// templates (search); .bicepparam needs Azure CLI with Bicep support for parameter files (2.53+).
using './main.bicep'

param namePrefix = 'tcq'

// Runtime and scale. See "Scaling" in infra/README.md.
param nodeRuntimeVersion = '22'
param instanceMemoryMB = 2048
param maximumInstanceCount = 100
param httpPerInstanceConcurrency = 200
param alwaysReadyInstances = 0

// Dashboard origins, e.g. ['https://tc-ui.example.com']. Empty: no CORS.
param corsAllowedOrigins = []

param dataStorageSku = 'Standard_LRS'
param logRetentionDays = 30

// Secrets and access to them.
param rootAccessToken = readEnvironmentVariable('QUEUE_ROOT_ACCESS_TOKEN')
param tokenEncryptionKey = readEnvironmentVariable('QUEUE_TOKEN_ENCRYPTION_KEY')
param adminPrincipalId = readEnvironmentVariable('QUEUE_ADMIN_PRINCIPAL_ID', '')
param adminPrincipalType = 'User'
param keyVaultPurgeProtection = true

// Queue service settings (QUEUE_* app settings).
param publicUrl = ''  // empty: https://<function app default hostname>
param storagePrefix = 'tcq'
param rootClientId = 'static/root'
param issuerClientId = 'static/taskcluster/queue'
param claimTimeoutSeconds = 1200
param claimWorkPollSeconds = 20
param deadlineDelaySeconds = 60
param reaperSchedule = '*/10 * * * * *'
param reaperStaleSeconds = 300
param maxTaskDeadlineDays = 5

// Existing storage accounts whose tables and containers Auth hands out SAS for, reached through the
// app identity (QUEUE_AZURE_ACCOUNTS), e.g. [{ name: 'sttasks01' }, { name: 'sttasks02', resourceGroup: 'tasks-rg' }].
param delegatedStorageAccounts = []
